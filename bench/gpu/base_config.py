"""The GPU benchmark's one configuration: the paper's base model and a batch near its 25,000
target tokens per step (section 5.1). Standard library only: the peers import it beside
frameworks that t2t_lite does not use."""

LAYERS = 6  # encoder and decoder layers each
D_MODEL = 512
HEADS = 8
D_FF = 2048
VOCAB = 37000  # the paper's shared byte-pair vocabulary for English-German
DROPOUT = 0.1
LABEL_SMOOTHING = 0.1
SENTENCES = 384  # per step
LENGTH = 64  # source and target tokens per sentence, EOS last
TARGET_TOKENS = SENTENCES * LENGTH  # 24,576

# NVIDIA H100 SXM5 dense peaks, TFLOP/s (NVIDIA's H100 datasheet): the MFU denominators.
PEAK_TFLOPS = {"float32": 494.7, "bfloat16": 989.4, "float16": 989.4}  # float32 as TF32
