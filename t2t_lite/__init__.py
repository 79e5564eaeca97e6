"""t2t_lite: the Transformer of "Attention Is All You Need" on TensorFlow 2 and Keras 3.

    from t2t_lite import Translator
    Translator.from_run("runs/ende").translate(["Hello."])  # a run folder or an export

`Translator` (t2t_lite.decode.translator) is imported when first read, so that importing the
package does not load TensorFlow. TensorFlow's start-up lines (absl's, oneDNN's, the CPU and
CUDA notes) are held back when it loads (`t2t_lite.runtime.tensorflow_start`).
"""

from t2t_lite.runtime import tensorflow_start

# The one place of the version (pyproject.toml reads it); CHANGELOG.md says what each changed.
__version__ = "0.2.0"

tensorflow_start.hold_startup_lines()


def __getattr__(name: str):
    if name == "Translator":
        from t2t_lite.decode.translator import Translator

        return Translator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
