package jit

import (
	"fmt"

	"github.com/tcc-dev/tcc/codegen/hostcfg"
)

// Data format codes (tt-metal's tt::DataFormat,
// tt_metal/api/tt-metalium/tt_backend_api_types.hpp).
const (
	fmtFloat32   = 0
	fmtFloat16   = 1
	fmtBfp8      = 2
	fmtBfp4      = 3
	fmtTf32      = 4
	fmtFloat16B  = 5
	fmtBfp8B     = 6
	fmtBfp4B     = 7
	fmtInt32     = 8
	fmtUInt16    = 9
	fmtLf8       = 10
	fmtBfp2      = 11
	fmtInt8      = 14
	fmtBfp2B     = 15
	fmtUInt32    = 24
	fmtFp8E4M3   = 26
	fmtUInt8     = 30
	fmtRawUInt8  = 240
	fmtRawUInt16 = 241
	fmtRawUInt32 = 242
	fmtInvalid   = 255
)

// The rules below are tt-metal's at target.TTMetalRelease:
// tt_metal/jit_build/data_format.cpp (line numbers cited) as
// generate_data_format_descriptors (tt_metal/jit_build/genfiles.cpp lines
// 373-412) applies them with int_fpu_en and bfp8_pack_precise false (tcc
// sets neither).

// validFormats is ALL_VALID_FORMATS (data_format.cpp lines 18-23).
var validFormats = map[int]bool{
	fmtBfp8: true, fmtBfp8B: true, fmtBfp4: true, fmtBfp4B: true, fmtBfp2: true, fmtBfp2B: true,
	fmtFloat16: true, fmtFloat16B: true, fmtFloat32: true, fmtRawUInt32: true, fmtRawUInt16: true, fmtRawUInt8: true,
	fmtTf32: true, fmtLf8: true, fmtFp8E4M3: true, fmtInt8: true, fmtInt32: true, fmtUInt8: true, fmtUInt32: true, fmtUInt16: true,
}

// isExpB is is_exp_b_format (lines 43-48): Tf32, Float16_b and the _b
// block-float formats have an 8-bit exponent.
func isExpB(f int) bool {
	return f == fmtTf32 || f == fmtFloat16B || f == fmtBfp8B || f == fmtBfp4B || f == fmtBfp2B
}

// isBFP is is_bfp_format (lines 36-41).
func isBFP(f int) bool {
	return f == fmtBfp8 || f == fmtBfp8B || f == fmtBfp4 || f == fmtBfp4B || f == fmtBfp2 || f == fmtBfp2B
}

// isInteger is tt::is_integer_format (tt_metal/common/tt_backend_api_types.cpp
// lines 60-65).
func isInteger(f int) bool {
	switch f {
	case fmtUInt32, fmtInt8, fmtUInt16, fmtUInt8, fmtInt32, fmtRawUInt32, fmtRawUInt16, fmtRawUInt8:
		return true
	}
	return false
}

// bfpOf is the Bfp8 format of f's exponent width, the unpack destination
// and pack source of every block-float CB.
func bfpOf(f int) int {
	if isExpB(f) {
		return fmtBfp8B
	}
	return fmtBfp8
}

// skipsExpCheck lists the formats check_consistent_format_across_buffers
// (lines 54-80) skips, line 57: "Float32 can pair with any exponent
// precision"; the 32-bit, 16-bit and 8-bit integer and raw formats too,
// but not Int8.
var skipsExpCheck = map[int]bool{
	fmtFloat32: true, fmtRawUInt32: true, fmtUInt32: true, fmtRawUInt16: true,
	fmtRawUInt8: true, fmtUInt16: true, fmtUInt8: true, fmtInt32: true,
}

// unpackConditionalFormat is unpack_conditional_dst_format (genfiles.cpp
// lines 382-388), the unpack destination and pack source of Float32 CBs:
// Float16 for exponent precision A, Float16_b for B, Tf32 with fp32
// accumulation when every format is Float32 (is_all_fp32_formats, lines
// 132-139) or the precision is B. The precision (get_data_exp_precision,
// lines 93-96) is that of the last format check_consistent_format_across_buffers
// does not skip, A when there is none; those formats must share one
// exponent width and be valid (TT_FATAL in tt-metal, an error here).
// formats are the kernel's CB formats, fmtInvalid for an unused index.
func unpackConditionalFormat(formats []int, fp32Acc bool) (int, error) {
	last, all32 := fmtInvalid, true
	for _, f := range formats {
		if f != fmtInvalid && f != fmtFloat32 {
			all32 = false
		}
		if skipsExpCheck[f] || f == fmtInvalid {
			continue
		}
		if !validFormats[f] {
			return 0, fmt.Errorf("CB data format %d: tt-metal does not support it (Format = %d not supported)", f, f)
		}
		if last != fmtInvalid && isExpB(f) != isExpB(last) {
			return 0, fmt.Errorf("CB data formats %d and %d have different exponent widths: tt-metal refuses the program (All input data-formats must have the same exponent format)", last, f)
		}
		last = f
	}
	expPrecB := last != fmtInvalid && isExpB(last)
	switch {
	case fp32Acc && (all32 || expPrecB):
		return fmtTf32, nil
	case expPrecB:
		return fmtFloat16B, nil
	}
	return fmtFloat16, nil
}

// rawAsFloat maps the raw formats to the formats they unpack and pack as
// (get_unpack_src_formats, lines 98-112, and its siblings): RawUInt32 as
// Float32, RawUInt16 as Float16, RawUInt8 as Lf8; other formats are
// themselves.
func rawAsFloat(f int) int {
	switch f {
	case fmtRawUInt32:
		return fmtFloat32
	case fmtRawUInt16:
		return fmtFloat16
	case fmtRawUInt8:
		return fmtLf8
	}
	return f
}

// unpackDstFormat is get_unpack_dst_formats (lines 141-183) for one CB of
// format f: a Float32 CB unpacked to DEST (toDest, UnpackToDestFp32) stays
// Float32, another Float32 CB takes cond, a block-float CB unpacks as
// Bfp8 of its exponent width (get_single_unpack_dst_format, lines
// 114-130).
func unpackDstFormat(f, cond int, toDest bool) int {
	switch {
	case f == fmtRawUInt32 || f == fmtRawUInt16 || f == fmtRawUInt8:
		return rawAsFloat(f)
	case f == fmtFloat32 && toDest:
		return fmtFloat32
	case f == fmtFloat32:
		return cond
	case isBFP(f):
		return bfpOf(f)
	}
	return f
}

// packSrcFormat is get_single_pack_src_format (lines 185-309) for one CB
// of format f, the format DEST is packed from: with fp32 accumulation the
// CB's own format (Float16 as Float16_b, block floats as Bfp8 of their
// exponent width), without it cond for Float32, Bfp8 of the exponent
// width for block floats, else the CB's format. Formats tt-metal refuses
// (TT_THROW) are an error.
func packSrcFormat(f, cond int, fp32Acc bool) (int, error) {
	switch {
	case f == fmtRawUInt32 || f == fmtRawUInt16 || f == fmtRawUInt8:
		return rawAsFloat(f), nil
	case f == fmtUInt16 || f == fmtInvalid:
		return f, nil
	case f == fmtFp8E4M3:
		return fmtFloat16, nil
	case fp32Acc:
		switch {
		case isBFP(f):
			return bfpOf(f), nil
		case isExpB(f) || f == fmtFloat32:
			return f, nil
		case f == fmtFloat16:
			return fmtFloat16B, nil
		case f == fmtUInt32 || f == fmtInt32 || f == fmtUInt8 || f == fmtInt8:
			return f, nil
		}
		return 0, fmt.Errorf("CB data format %d: tt-metal has no conversion from an fp32 DEST to it (No valid conversion from fp32 dest to output format)", f)
	case isInteger(f):
		return f, nil
	case f == fmtFloat32:
		// lines 257-271: cond is Float16 or Float16_b here (Tf32 needs
		// fp32 accumulation)
		return cond, nil
	case isBFP(f):
		return bfpOf(f), nil
	}
	// Lines 254-256 take every other format (its input and output
	// exponent widths are both its own), so the mixed-width branch (lines
	// 281-307) is never reached.
	return f, nil
}

// tileBytes is the size of a 32x32 tile of format f, Tile::get_tile_size
// (tt_metal/impl/data_format/tile.cpp lines 70-95; exponent sections of
// block floats 64 bytes, 16-byte aligned), or for an unused index the
// default hlk_desc holds (BFLOAT8_B_TILE_HW, jit_build/hlk_desc.hpp).
func tileBytes(f int) (int, error) {
	const hw = 32 * 32
	switch f {
	case fmtInvalid, fmtBfp8, fmtBfp8B:
		return hw + 64, nil
	case fmtBfp4, fmtBfp4B:
		return hw/2 + 64, nil
	case fmtBfp2, fmtBfp2B:
		return hw/4 + 64, nil
	case fmtInt8, fmtLf8, fmtUInt8, fmtRawUInt8:
		return hw, nil
	case fmtFloat16, fmtFloat16B, fmtUInt16, fmtRawUInt16:
		return hw * 2, nil
	case fmtFloat32, fmtUInt32, fmtInt32, fmtRawUInt32:
		return hw * 4, nil
	}
	return 0, fmt.Errorf("data format %d has no tile size in tt-metal (Tile::get_tile_size throws)", f)
}

// kernelCBFormats is the build's CB format array for kernel k, tt-metal's
// hlk_desc.buf_dataformat_arr (ProgramImpl::set_cb_data_fmt,
// tt_metal/impl/program/program.cpp lines 1057-1068): the formats of the
// program's CBs whose cores intersect one of the kernel's core ranges
// (CoreRange::intersects), later CBs overriding earlier ones at the same
// index; fmtInvalid elsewhere. A CB only on other cores does not count.
func kernelCBFormats(cbs []hostcfg.CBConfig, cores []hostcfg.CoreRange) ([]int, error) {
	buf := make([]int, maxCBs)
	for i := range buf {
		buf[i] = fmtInvalid
	}
	for _, c := range cbs {
		if c.Index < 0 || c.Index >= maxCBs {
			return nil, fmt.Errorf("CB index %d out of range 0..%d", c.Index, maxCBs-1)
		}
		if c.DataFormatCode < 0 || c.DataFormatCode > 255 {
			return nil, fmt.Errorf("CB %d: data format code %d is not a tt::DataFormat", c.Index, c.DataFormatCode)
		}
	}
	for _, kr := range cores {
		for _, c := range cbs {
			for _, r := range c.Cores {
				if intersects(kr, r) {
					buf[c.Index] = c.DataFormatCode
					break
				}
			}
		}
	}
	return buf, nil
}

// persistentCBFormats is the CB format array of a merged kernel of a
// persistent program (hostcfg.PersistentConfig) on cores: every phase's
// CBs on cores that intersect them, at their merged indices
// (PhaseCBConfig.MergedIndex: codegen/kir.Persist.CBMap gives every merged
// index one data format over the program). Two formats at one merged
// index are an error naming both phases.
func persistentCBFormats(ps *hostcfg.PersistentConfig, cores []hostcfg.CoreRange) ([]int, error) {
	buf := make([]int, maxCBs)
	from := make([]int, maxCBs)
	for i := range buf {
		buf[i] = fmtInvalid
	}
	for _, ph := range ps.Phases {
		for _, c := range ph.CBs {
			if c.MergedIndex < 0 || c.MergedIndex >= maxCBs {
				return nil, fmt.Errorf("phase %d (%s): CB c_%d: merged index %d out of range 0..%d", ph.Index, ph.Name, c.Index, c.MergedIndex, maxCBs-1)
			}
			if c.DataFormatCode < 0 || c.DataFormatCode > 255 {
				return nil, fmt.Errorf("phase %d (%s): CB c_%d: data format code %d is not a tt::DataFormat", ph.Index, ph.Name, c.Index, c.DataFormatCode)
			}
			if !anyIntersects(cores, c.Cores) {
				continue
			}
			m := c.MergedIndex
			if buf[m] != fmtInvalid && buf[m] != c.DataFormatCode {
				return nil, fmt.Errorf("merged CB index %d holds data format %d in phase %d and %d in phase %d (%s, CB c_%d); a merged binary has one format per index",
					m, buf[m], from[m], c.DataFormatCode, ph.Index, ph.Name, c.Index)
			}
			buf[m], from[m] = c.DataFormatCode, ph.Index
		}
	}
	return buf, nil
}

func anyIntersects(as, bs []hostcfg.CoreRange) bool {
	for _, a := range as {
		for _, b := range bs {
			if intersects(a, b) {
				return true
			}
		}
	}
	return false
}

// intersects is CoreRange::intersects (tt_metal/common/core_coord.cpp
// lines 49-56).
func intersects(a, b hostcfg.CoreRange) bool {
	return !(a.X1 < b.X0 || a.X0 > b.X1 || a.Y1 < b.Y0 || a.Y0 > b.Y1)
}
