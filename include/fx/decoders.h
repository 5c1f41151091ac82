#pragma once
/// \file
/// Decoder LLMs (docs/decoders.md): LLaMA-family models from Hugging Face
/// checkpoints with a static KV cache (fx/decoders/llama.h) and decoding
/// (fx/decoders/generate.h).

#include <fx/decoders/generate.h>
#include <fx/decoders/llama.h>
