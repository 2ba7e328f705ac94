//! The weights of a llama-architecture GGUF model, loaded for candle's quantized llama.
//!
//! candle 0.11's CPU kernels pick an AVX2 dot product at run time for Q4_0, Q8_0 and the
//! K-quants, but Q4_1, Q5_0, Q5_1 and Q8_1 only have a scalar one (their SIMD paths are
//! compiled in only with `-C target-feature`, which a portable binary cannot assume). Such
//! tensors are re-quantized to Q8_0 at load: a Q4_1 model then decodes about 3.5 times as
//! fast with the same greedy output: Q8_0's 8 bits per weight are finer than the 4 or 5 it
//! replaces, whereas Q4_0 (also fast) would round again and change the answers.

use std::io::{Cursor, Read, Seek, Write as _};
use std::path::Path;

use candle_core::Device;
use candle_core::quantized::gguf_file::{self, Content};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_transformers::models::quantized_llama::ModelWeights;

/// Whether candle multiplies tensors of `dtype` with a scalar loop only.
fn lacks_runtime_simd(dtype: GgmlDType) -> bool {
    matches!(
        dtype,
        GgmlDType::Q4_1 | GgmlDType::Q5_0 | GgmlDType::Q5_1 | GgmlDType::Q8_1
    )
}

/// Loads the weights described by `content` from `reader`; the error is a detail for the
/// caller to tie to the file. A model that needs re-quantizing is re-quantized once: the
/// result is kept at `cache` (beside the model, so removing or re-pulling the model removes
/// it too) and read from there at later loads, which then take a third of the time and
/// none of the re-quantizing's transient memory.
pub(crate) fn load<R: Read + Seek>(
    content: Content,
    reader: &mut R,
    cache: &Path,
) -> Result<ModelWeights, String> {
    let device = Device::Cpu;
    let slow = content
        .tensor_infos
        .values()
        .any(|info| lacks_runtime_simd(info.ggml_dtype));
    if !slow {
        return ModelWeights::from_gguf(content, reader, &device).map_err(|err| err.to_string());
    }
    if let Ok(mut file) = std::fs::File::open(cache) {
        let cached = Content::read(&mut file)
            .and_then(|content| ModelWeights::from_gguf(content, &mut file, &device));
        match cached {
            Ok(weights) => return Ok(weights),
            Err(err) => tracing::warn!(
                "{}: not a usable re-quantized copy ({err}); making it again",
                cache.display()
            ),
        }
    }
    let mut buffer = requantized(&content, reader, &device)?;
    // Best effort: a store that cannot be written (read-only, full) only costs the next
    // load the re-quantizing again.
    if let Err(err) = keep(cache, buffer.get_ref()) {
        tracing::warn!(
            "cannot keep the re-quantized model at {}: {err}",
            cache.display()
        );
    }
    let content = Content::read(&mut buffer).map_err(|err| err.to_string())?;
    // `buffer` is a whole copy of the model: it goes when this returns, and only the
    // weights the model copied out of it stay.
    ModelWeights::from_gguf(content, &mut buffer, &device).map_err(|err| err.to_string())
}

/// Writes `bytes` to `path` whole or not at all: a temp file beside it, renamed into place.
fn keep(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(bytes)?;
    temp.as_file().sync_all()?;
    temp.persist(path).map_err(|err| err.error)?;
    Ok(())
}

/// The model rewritten as an in-memory GGUF with its slow tensors in Q8_0, which is
/// simpler than building `ModelWeights` by hand and keeps candle's own reading of the
/// metadata.
fn requantized<R: Read + Seek>(
    content: &Content,
    reader: &mut R,
    device: &Device,
) -> Result<Cursor<Vec<u8>>, String> {
    let mut infos: Vec<_> = content.tensor_infos.iter().collect();
    // In file order, so the file is read front to back.
    infos.sort_by_key(|(_, info)| info.offset);
    let mut tensors: Vec<(&str, QTensor)> = Vec::with_capacity(infos.len());
    for (name, info) in infos {
        let tensor = content
            .tensor(reader, name, device)
            .map_err(|err| format!("tensor `{name}`: {err}"))?;
        let tensor = if lacks_runtime_simd(info.ggml_dtype) {
            let values = tensor
                .dequantize(device)
                .map_err(|err| format!("tensor `{name}`: {err}"))?;
            QTensor::quantize(&values, GgmlDType::Q8_0)
                .map_err(|err| format!("tensor `{name}` to Q8_0: {err}"))?
        } else {
            tensor
        };
        tensors.push((name.as_str(), tensor));
    }
    let mut metadata: Vec<(&str, &gguf_file::Value)> = content
        .metadata
        .iter()
        .map(|(key, value)| (key.as_str(), value))
        .collect();
    metadata.sort_by_key(|(key, _)| *key);
    let tensor_refs: Vec<(&str, &QTensor)> = tensors
        .iter()
        .map(|(name, tensor)| (*name, tensor))
        .collect();
    let bytes: usize = tensors
        .iter()
        .map(|(_, tensor)| tensor.storage_size_in_bytes() + 32)
        .sum();
    // Sized up front (the metadata is well under the file's header) so the buffer is not
    // regrown, which would briefly hold two copies.
    let header = usize::try_from(content.tensor_data_offset).unwrap_or(0);
    let mut buffer = Cursor::new(Vec::with_capacity(bytes + header + 4096));
    gguf_file::write(&mut buffer, &metadata, &tensor_refs)
        .map_err(|err| format!("re-quantizing: {err}"))?;
    buffer.set_position(0);
    Ok(buffer)
}
