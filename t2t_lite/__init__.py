"""t2t_lite: the Transformer of "Attention Is All You Need" on TensorFlow 2 and Keras 3.

    from t2t_lite import Translator
    Translator.from_run("runs/ende").translate(["Hello."])  # a run folder or an export

`Translator` (t2t_lite.decode.translator) is imported when first read, so that importing the
package does not load TensorFlow.
"""

# The one place of the version (pyproject.toml reads it); CHANGELOG.md says what each changed.
__version__ = "0.2.0"


def __getattr__(name: str):
    if name == "Translator":
        from t2t_lite.decode.translator import Translator

        return Translator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
