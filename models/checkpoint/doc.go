// Package checkpoint turns a Hugging Face checkpoint (safetensors, bf16,
// FP8 or compressed-tensors NVFP4) into device-ready weights: the exact
// page bytes every weight buffer of a tcc build holds on every device.
//
// The contract is the build's programs.json (codegen.ProgramsFile):
// weights[] gives each weight buffer's source (checkpoint tensor,
// transposed, the tensor-parallel cut) and buffers[] its dtype, layout,
// shape and pages. Convert follows exactly that: for every weight buffer
// it reads the checkpoint tensor (dequantising FP8 and NVFP4 as the
// config's quantization_config declares; modules in its ignore list must
// be stored unquantised), transposes, pads and cuts it per device with
// nn.Share (the function the model's own sharding uses), tilizes it and
// packs it into the buffer's dtype with tt-metal's host packer
// (numerics.PackTilesHost), 32 rows at a time so peak memory is bounded
// by one tensor's dequantised form, not by the checkpoint.
//
// The result is a cache directory: one file per device (device-N.bin,
// the buffers back to back) and manifest.json recording, per buffer, the
// sha256 of the source tensors' bytes and of every device's result.
// Conversion appends to *.partial files and rewrites a partial manifest
// atomically after each buffer, so an interrupted conversion resumes
// after its last verified buffer; a finished cache whose contract and
// source checksums match is reused as is; a failed conversion removes its
// partial files.
//
// Dequantisation (w is float32, one rounding):
//   - FP8 (quant_method "fp8", fmt e4m3): w = q * s, s the
//     weight_scale_inv entry of the [128, 128] block (weight_block_size)
//     holding the element, or the tensor's one scale;
//   - NVFP4 (compressed-tensors, nvfp4-pack-quantized): weight_packed U8
//     [out, in/2], two E2M1 codes per byte, low nibble first;
//     weight_scale F8_E4M3 [out, in/16]; weight_global_scale F32 scalar:
//     w = (e2m1 * scale) / global_scale (the global scale divides;
//     input_global_scale is an activation scale and is not read).
package checkpoint
