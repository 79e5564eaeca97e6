"""The one definition of a line: CRLF, BOM, empty lines, and every malformed-input error."""

import pytest

from t2t_lite.data import LineError, check_parallel, count_lines, read_lines, read_parallel


def _write(tmp_path, name, data: bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_crlf_bom_and_empty_lines(tmp_path):
    path = _write(tmp_path, "a.txt", b"\xef\xbb\xbfHello  \r\n\r\n   \nw\xc3\xb6rld\nlast")
    stats_lines = list(read_lines(path))
    assert stats_lines == [(1, "Hello"), (4, "w\u00f6rld"), (5, "last")]
    stats = count_lines(path)
    assert (stats.lines, stats.kept, stats.skipped_empty) == (5, 3, 2)


def test_bom_only_stripped_on_first_line(tmp_path):
    path = _write(tmp_path, "a.txt", b"a\n\xef\xbb\xbfb\n")
    assert [t for _, t in read_lines(path)] == ["a", "\ufeffb"]


@pytest.mark.parametrize(
    "data, line, message",
    [
        (b"one\rtwo\rthree\r", 1, "carriage return"),
        (b"ok\nbad\x00byte\n", 2, "NUL byte"),
        (b"ok\nok\n\xff\xfe\n", 3, "invalid UTF-8"),
    ],
)
def test_malformed_lines_name_file_and_line(tmp_path, data, line, message):
    path = _write(tmp_path, "bad.txt", data)
    with pytest.raises(LineError, match=rf"bad\.txt:{line}: .*{message}"):
        list(read_lines(path))


def test_missing_file_names_the_flag(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"--train_src: file not found: .*nope\.txt"):
        count_lines(str(tmp_path / "nope.txt"), what="--train_src")


def test_parallel_skips_pairs_with_an_empty_side(tmp_path):
    src = _write(tmp_path, "s", b"a\n\nc\nd\n")
    tgt = _write(tmp_path, "t", b"A\nB\n \nD\n")
    stats = check_parallel(src, tgt)
    assert (stats.lines, stats.kept, stats.skipped_empty) == (4, 2, 2)
    assert list(read_parallel(src, tgt)) == [(1, "a", "A"), (4, "d", "D")]


def test_parallel_count_mismatch_names_both_files_and_counts(tmp_path):
    src = _write(tmp_path, "src.txt", b"a\nb\nc\n")
    tgt = _write(tmp_path, "tgt.txt", b"A\nB\n")
    with pytest.raises(
        LineError, match=r"--train_src .*src\.txt has 3 lines, --train_tgt .*tgt\.txt has 2"
    ):
        check_parallel(src, tgt, "--train_src", "--train_tgt")
    with pytest.raises(LineError, match="differ in line count"):
        list(read_parallel(src, tgt))
