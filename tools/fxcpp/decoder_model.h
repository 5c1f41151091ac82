#pragma once
// The decoder fxcpp generate runs, from a checkpoint folder or a .fx file,
// on the engine and precision the command line asks for (decoder_model.cpp).
#include "model_io.h"

#include <fx/decoders.h>
#include <fx/decoders/weight_only.h>

#include <functional>
#include <string>
#include <vector>

namespace fx::cli {

/// The --names of the decoder's options that take a value, and the switches.
extern const std::vector<std::string> kDecoderFlags;
extern const std::vector<std::string> kDecoderSwitches;

/// A decoder ready to generate.
struct OpenedDecoder {
  /// One forward (tokens, input_pos) -> logits.
  decoders::DecoderStep step;
  /// Empties the caches (a new sequence).
  std::function<void()> reset;
  /// Positions the caches hold; tokens in the vocabulary.
  int64_t max_seq = 0, vocab_size = 0;
  /// What runs, for the timings line and --json ("fxcpp, int4 group 32 (avx512-vnni)").
  std::string engine;
};

/// Opens args.model (a checkpoint folder: config.json and safetensors; or a
/// .fx file of a decoder graph) with --engine eager|fxcpp (eager: the C++
/// model, or the graph as it is; fxcpp, the default: captured and
/// optimised), --quantize int8|int4 [--group-size G] [--asymmetric]
/// (fx::quantize_weight_only; fxcpp only), and `max_seq` positions (0: the
/// checkpoint's max_position_embeddings, or the graph's). Bad input throws
/// fx::Error, one line.
OpenedDecoder open_decoder(const ModelArgs& args, int64_t max_seq);

/// The weight-only scheme of --quantize / --weight-only VALUE, --group-size and --asymmetric.
decoders::WeightOnlyScheme weight_only_scheme(const ModelArgs& args, const std::string& flag);

}  // namespace fx::cli
