package hostcfg

import (
	"encoding/json"
	"sort"
	"strconv"
)

// AppendJSON appends json.Marshal(c) to b, byte for byte (HTML-escaped
// strings, sorted define keys, null for nil slices and maps, omitempty
// fields left out), without reflection: a 256-token prefill build of qwen27b at
// 1x2 encodes 3,254 configs holding millions of runtime values, and encoding/json
// re-scans every MarshalJSON output.
func AppendJSON(b []byte, c *ProgramConfig) ([]byte, error) {
	if c == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, `{"program":`...)
	b = appendString(b, c.Program)
	b = append(b, `,"kernels":`...)
	if c.Kernels == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range c.Kernels {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendKernel(b, &c.Kernels[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"cbs":`...)
	b = appendList(b, c.CBs, appendCB)
	b = append(b, `,"semaphores":`...)
	b = appendList(b, c.Semaphores, appendSemaphore)
	b = append(b, `,"buffers":`...)
	b = appendList(b, c.Buffers, appendBuffer)
	if c.Persistent != nil {
		// One per build: encoding/json's speed is enough.
		js, err := json.Marshal(c.Persistent)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"persistent":`...)
		b = append(b, js...)
	}
	return append(b, '}'), nil
}

// appendList appends the JSON array of xs (null for nil), each element by
// one.
func appendList[T any](b []byte, xs []T, one func([]byte, *T) []byte) []byte {
	if xs == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = one(b, &xs[i])
	}
	return append(b, ']')
}

func appendKernel(b []byte, k *KernelConfig) ([]byte, error) {
	var err error
	b = append(b, `{"name":`...)
	b = appendString(b, k.Name)
	b = append(b, `,"source":`...)
	b = appendString(b, k.Source)
	b = append(b, `,"role":`...)
	b = appendString(b, k.Role)
	b = append(b, `,"processor":`...)
	b = appendString(b, k.Processor)
	if k.NoC != nil {
		b = append(b, `,"noc":`...)
		b = strconv.AppendInt(b, int64(*k.NoC), 10)
	}
	b = append(b, `,"cores":`...)
	b = appendRanges(b, k.Cores)
	if c := k.Compute; c != nil {
		b = append(b, `,"compute":{"math_fidelity":`...)
		b = appendString(b, c.MathFidelity)
		b = append(b, `,"fp32_dest_acc_en":`...)
		b = strconv.AppendBool(b, c.FP32DestAccEn)
		b = append(b, `,"math_approx_mode":`...)
		b = strconv.AppendBool(b, c.MathApproxMode)
		b = append(b, `,"dst_full_sync_en":`...)
		b = strconv.AppendBool(b, c.DstFullSyncEn)
		b = append(b, `,"unpack_to_dest_fp32_cbs":`...)
		b = appendList(b, c.UnpackToDestFP32, func(b []byte, n *int) []byte { return strconv.AppendInt(b, int64(*n), 10) })
		b = append(b, '}')
	}
	if e := k.Ethernet; e != nil {
		b = append(b, `,"ethernet":{"eth_mode":`...)
		b = appendString(b, e.EthMode)
		b = append(b, `,"noc":`...)
		b = strconv.AppendInt(b, int64(e.NoC), 10)
		b = append(b, `,"processor":`...)
		b = appendString(b, e.Processor)
		b = append(b, '}')
	}
	b = append(b, `,"defines":`...)
	if k.Defines == nil {
		b = append(b, "null"...)
	} else {
		keys := make([]string, 0, len(k.Defines))
		for n := range k.Defines {
			keys = append(keys, n)
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, n := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, n)
			b = append(b, ':')
			b = appendString(b, k.Defines[n])
		}
		b = append(b, '}')
	}
	b = append(b, `,"compile_args":`...)
	if b, err = appendNamedArgs(b, k.CompileArgs); err != nil {
		return nil, err
	}
	b = append(b, `,"runtime_arg_names":`...)
	b = appendList(b, k.RuntimeArgNames, func(b []byte, s *string) []byte { return appendString(b, *s) })
	b = append(b, `,"runtime_args":`...)
	if k.RuntimeArgs == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range k.RuntimeArgs {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = k.RuntimeArgs[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"common_runtime_args":`...)
	if b, err = appendNamedArgs(b, k.CommonRuntimeArgs); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendNamedArgs(b []byte, as []NamedArg) ([]byte, error) {
	if as == nil {
		return append(b, "null"...), nil
	}
	b = append(b, '[')
	for i, a := range as {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(a.Index), 10)
		b = append(b, `,"name":`...)
		b = appendString(b, a.Name)
		b = append(b, `,"value":`...)
		var err error
		if b, err = a.Value.appendJSON(b); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	return append(b, ']'), nil
}

func appendCB(b []byte, c *CBConfig) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(c.Index), 10)
	if c.Name != "" {
		b = append(b, `,"name":`...)
		b = appendString(b, c.Name)
	}
	b = append(b, `,"page_size":`...)
	b = strconv.AppendInt(b, int64(c.PageSize), 10)
	b = append(b, `,"num_pages":`...)
	b = strconv.AppendInt(b, int64(c.NumPages), 10)
	b = append(b, `,"total_size":`...)
	b = strconv.AppendInt(b, int64(c.TotalSize), 10)
	b = append(b, `,"data_format":`...)
	b = appendString(b, c.DataFormat)
	b = append(b, `,"data_format_code":`...)
	b = strconv.AppendInt(b, int64(c.DataFormatCode), 10)
	b = append(b, `,"cores":`...)
	b = appendRanges(b, c.Cores)
	if c.BackingBuffer != "" {
		b = append(b, `,"backing_buffer":`...)
		b = appendString(b, c.BackingBuffer)
	}
	return append(b, '}')
}

func appendSemaphore(b []byte, s *SemaphoreConfig) []byte {
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, int64(s.ID), 10)
	b = append(b, `,"cores":`...)
	b = appendRanges(b, s.Cores)
	b = append(b, `,"initial":`...)
	b = strconv.AppendUint(b, uint64(s.Initial), 10)
	if s.CoreType != "" {
		b = append(b, `,"core_type":`...)
		b = appendString(b, s.CoreType)
	}
	return append(b, '}')
}

func appendBuffer(b []byte, c *BufferConfig) []byte {
	b = append(b, `{"name":`...)
	b = appendString(b, c.Name)
	b = append(b, `,"memory":`...)
	b = appendString(b, c.Memory)
	if s := c.Shard; s != nil {
		b = append(b, `,"shard":{"grid":`...)
		b = appendString(b, s.Grid.String())
		b = append(b, `,"shape":[`...)
		b = strconv.AppendInt(b, int64(s.Shape[0]), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(s.Shape[1]), 10)
		b = append(b, "]}"...)
	}
	b = append(b, `,"dtype":`...)
	b = appendString(b, c.DType)
	b = append(b, `,"data_format":`...)
	b = appendString(b, c.DataFormat)
	b = append(b, `,"layout":`...)
	b = appendString(b, c.Layout)
	b = append(b, `,"page_size":`...)
	b = strconv.AppendInt(b, int64(c.PageSize), 10)
	b = append(b, `,"pages":`...)
	b = strconv.AppendInt(b, int64(c.Pages), 10)
	if l := c.Blocks; l != nil {
		b = append(b, `,"blocks":{"kt":`...)
		b = strconv.AppendInt(b, int64(l.Kt), 10)
		b = append(b, `,"nt":`...)
		b = strconv.AppendInt(b, int64(l.Nt), 10)
		b = append(b, `,"period":`...)
		b = strconv.AppendInt(b, int64(l.Period), 10)
		b = append(b, `,"dest":`...)
		b = strconv.AppendInt(b, int64(l.Dest), 10)
		b = append(b, `,"kb":`...)
		b = strconv.AppendInt(b, int64(l.KB), 10)
		b = append(b, '}')
	}
	return append(b, '}')
}

// appendRanges appends rs as CoreRange.MarshalJSON writes each (null for
// nil).
func appendRanges(b []byte, rs []CoreRange) []byte {
	return appendList(b, rs, func(b []byte, r *CoreRange) []byte { return appendString(b, r.String()) })
}

// appendString appends json.Marshal(s): the quoted string, with
// encoding/json's escapes (HTML characters included) where any is needed.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			js, _ := json.Marshal(s) // a string always encodes
			return append(b, js...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
