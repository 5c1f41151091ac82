#pragma once
/// \file
/// Decoder LLMs (docs/decoders.md): LLaMA-family models from Hugging Face
/// checkpoints with a static KV cache (fx/decoders/llama.h), decoding
/// (fx/decoders/generate.h), and the SentencePiece tokenizer with streaming
/// detokenization (fx/decoders/tokenizer.h).

#include <fx/decoders/generate.h>
#include <fx/decoders/llama.h>
#include <fx/decoders/tokenizer.h>
