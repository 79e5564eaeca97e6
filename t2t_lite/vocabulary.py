"""The reserved ids and tokens that begin every vocabulary.

Id 0 is padding and also the decoder's start symbol (as in tensor2tensor), 1 ends a sentence and
2 stands for an unknown piece. The data path writes them into every vocabulary, the model masks
padding and the searches stop at EOS, so this module sits below both and imports nothing.
"""

PAD_ID = 0
EOS_ID = 1
UNK_ID = 2
RESERVED_TOKENS = ("<pad>", "<EOS>", "<unk>")
