"""t2t_lite.decode.batches: how lines become batches, and the bucketed shapes of --jit_compile."""

from __future__ import annotations

import numpy as np
import pytest

from t2t_lite.decode.batches import bucket_rows, bucket_width, pad_batch, token_batches


def test_token_batches_sort_and_bound():
    batches = token_batches([5, 1, 3, 3, 9, 2], batch_tokens=6)
    # Sorted lengths 1 2 | 3 3 | 5 | 9: a third row of 3 would make 9 > 6 tokens.
    assert batches == [[1, 5], [2, 3], [0], [4]]


def test_token_batches_bound_the_padded_width():
    # Widths 8 for lengths up to 8, 16 up to 16: 2 rows of width 8 fit 16 tokens, 1 of width 16.
    batches = token_batches([3, 1, 9, 2, 5], batch_tokens=16, width=bucket_width)
    assert batches == [[1, 3], [0, 4], [2]]


def test_bucket_width_multiples_of_8_then_four_per_doubling():
    lengths = [1, 7, 8, 9, 63, 64, 65, 80, 81, 100, 128, 129, 200, 256, 257, 500]
    widths = [8, 8, 8, 16, 64, 64, 80, 80, 96, 112, 128, 160, 224, 256, 320, 512]
    assert [bucket_width(n) for n in lengths] == widths
    # At most 25 % padding past 32 tokens, and few shapes: 20 widths for lengths up to 512.
    assert all(bucket_width(n) <= 1.25 * n for n in range(33, 2049))
    assert len({bucket_width(n) for n in range(1, 513)}) == 20


def test_bucket_rows_a_power_of_two_within_the_batch():
    assert bucket_rows(3, width=16, batch_tokens=4096) == 4
    assert bucket_rows(100, width=24, batch_tokens=4096) == 128
    assert bucket_rows(150, width=24, batch_tokens=4096) == 170  # 4096 // 24 rows at most
    assert bucket_rows(1, width=5000, batch_tokens=4096) == 1  # a single row longer than a batch
    assert bucket_rows(256, width=16, batch_tokens=4096) == 256


def test_pad_batch_pads_width_and_repeats_the_last_row():
    out = pad_batch([[5, 1], [7, 8, 1]], width=4, count=4)
    expected = [[5, 1, 0, 0], [7, 8, 1, 0], [7, 8, 1, 0], [7, 8, 1, 0]]
    np.testing.assert_array_equal(out, np.array(expected, np.int32))
    np.testing.assert_array_equal(pad_batch([[4, 1], [1]]), [[4, 1], [1, 0]])
    with pytest.raises(ValueError, match="2 rows of up to 3 ids into 2 x 2"):
        pad_batch([[5, 1], [7, 8, 1]], width=2)
