"""TensorFlow's saved_model_cli, with tensorflow-text's ops registered first.

The stock `saved_model_cli run` cannot load an exported t2t_lite model: its graph uses
tensorflow-text tokenizer ops, which exist only after `import tensorflow_text`. This wrapper
imports it and hands over to TensorFlow's own command, with the same arguments:

  python -m t2t_lite.bin.saved_model_cli show --dir EXPORT/1 --all
  python -m t2t_lite.bin.saved_model_cli run --dir EXPORT/1 --tag_set serve \\
      --signature_def serving_default --input_exprs 'inputs=["Ein kleiner Test."]'
"""

from __future__ import annotations

import tensorflow_text  # noqa: F401  (registers the tokenizer ops the exported graph uses)
from tensorflow.python.tools import saved_model_cli


def run() -> None:
    saved_model_cli.main()


if __name__ == "__main__":
    run()
