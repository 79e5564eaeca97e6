"""Float64 NumPy references of the paper's formulas, written independently of the layers."""

import numpy as np


def softmax(x, axis=-1):
    x = x - x.max(axis=axis, keepdims=True)
    e = np.exp(x)
    return e / e.sum(axis=axis, keepdims=True)


def multi_head_attention(query, memory, wq, wk, wv, wo, mask=None):
    """query [b, q, d], memory [b, k, d]; wq/wk [d, h, dk], wv [d, h, dv], wo [h, dv, d];
    mask [b, q, k] bool. Loops over heads as the paper's Concat(head_1..head_h) W^O."""
    heads = []
    for i in range(wq.shape[1]):
        q, k, v = query @ wq[:, i], memory @ wk[:, i], memory @ wv[:, i]
        scores = q @ k.transpose(0, 2, 1) / np.sqrt(wq.shape[2])
        if mask is not None:
            scores = np.where(mask, scores, -1e9)
        heads.append(softmax(scores) @ v)
    concat = np.concatenate(heads, axis=-1)  # --> [b, q, h * dv]
    return concat @ wo.reshape(-1, wo.shape[-1])


def feed_forward(x, w1, b1, w2, b2):
    return np.maximum(0, x @ w1 + b1) @ w2 + b2


def layer_norm(x, gamma, beta, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def positional_encoding(length, d_model):
    """Section 3.5, element by element."""
    pe = np.zeros((length, d_model))
    for pos in range(length):
        for i in range(d_model // 2):
            pe[pos, 2 * i] = np.sin(pos / 10000 ** (2 * i / d_model))
            pe[pos, 2 * i + 1] = np.cos(pos / 10000 ** (2 * i / d_model))
    return pe


def _smoothed_targets(targets, vocab, eps):
    """(b, t, y, q) for each non-padding target y at [b, t], q its smoothed distribution."""
    for b in range(targets.shape[0]):
        for t in range(targets.shape[1]):
            y = targets[b, t]
            if y == 0:
                continue
            dist = np.full(vocab, eps / (vocab - 1))
            dist[y] = 1 - eps
            yield b, t, y, dist


def label_smoothed_loss(logits, targets, eps):
    """Sum over non-padding tokens of the cross entropy against the smoothed distribution."""
    log_probs = np.log(softmax(logits.astype(np.float64)))
    total = nll_total = 0.0
    for b, t, y, dist in _smoothed_targets(targets, logits.shape[-1], eps):
        total += -(dist * log_probs[b, t]).sum()
        nll_total += -log_probs[b, t, y]
    return total, nll_total, float((targets != 0).sum())


def label_smoothed_loss_gradient(logits, targets, eps, on_smoothed, on_nll):
    """d/dlogits of on_smoothed * smoothed sum + on_nll * nll sum: per non-padding token,
    on_smoothed * (p - q) + on_nll * (p - onehot), q the smoothed target distribution."""
    vocab = logits.shape[-1]
    probs = softmax(logits.astype(np.float64))
    grad = np.zeros_like(probs)
    for b, t, y, dist in _smoothed_targets(targets, vocab, eps):
        onehot = np.eye(vocab)[y]
        grad[b, t] = on_smoothed * (probs[b, t] - dist) + on_nll * (probs[b, t] - onehot)
    return grad
