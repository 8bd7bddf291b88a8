package chip

import (
	"encoding/binary"
)

// NumL1Banks is the firmware's NUM_L1_BANKS for tcc's worker grid (one
// bank per worker core; the JIT passes it as a define).
func (c *Chip) NumL1Banks() int { return c.Target.NumWorkers() }

// DRAM endpoints per bank in translated coordinates (Blackhole enables NoC
// coordinate translation; hosts and kernels address DRAM at x 17/18, y
// 12..23): the worker endpoints of blackhole_140_arch.yaml's dram_views
// for NoC0 and NoC1, translated as ttsim's remap_virtual_coordinate does.
var (
	dramNoC0 = []XY{{18, 14}, {18, 15}, {18, 21}, {18, 18}, {17, 14}, {17, 17}, {17, 23}, {17, 20}}
	dramNoC1 = []XY{{18, 13}, {18, 16}, {18, 22}, {18, 19}, {17, 13}, {17, 16}, {17, 22}, {17, 19}}
)

// nocXY packs a coordinate as the firmware's bank tables hold it:
// (y << 6) | x (tt-metal NOC_XY_ENCODING for Blackhole).
func nocXY(p XY) uint16 { return uint16(p.Y<<6 | p.X) }

// BankTables returns the bytes of the bank-to-NoC scratch area
// (target.Layout.BankToNoC, read by firmware_common.h
// noc_bank_table_init): dram_bank_to_noc_xy[2][DRAM banks],
// l1_bank_to_noc_xy[2][L1 banks], bank_to_dram_offset[DRAM banks],
// bank_to_l1_offset[L1 banks]. L1 bank i is logical worker i in row-major
// order; every offset is 0 (tcc allocates each bank's pages itself).
func (c *Chip) BankTables() []byte {
	nd, nl := len(c.DRAM), c.NumL1Banks()
	b := make([]byte, 0, 4*nd+4*nl+4*(nd+nl))
	put16 := func(v uint16) { b = binary.LittleEndian.AppendUint16(b, v) }
	for _, tab := range [][]XY{c.DRAM, dramNoC1[:nd]} {
		for _, d := range tab {
			put16(nocXY(d))
		}
	}
	// Tensix translated coordinates are the same on both NoCs.
	for range 2 {
		for y := 0; y < c.Target.GridY; y++ {
			for x := 0; x < c.Target.GridX; x++ {
				put16(nocXY(XY{c.WorkerX[x], c.WorkerY[y]}))
			}
		}
	}
	for i := 0; i < nd+nl; i++ {
		b = binary.LittleEndian.AppendUint32(b, 0)
	}
	return b
}

// LogicalToVirtual returns the worker logical-to-NoC maps firmware reads
// at boot (target.Layout.LogicalToVirtual): worker_logical_col_to_virtual_col
// (noc_size_x = 17 rounded up to 20 bytes), then
// worker_logical_row_to_virtual_row (12 bytes).
func (c *Chip) LogicalToVirtual() []byte {
	b := make([]byte, 20+12)
	for i, x := range c.WorkerX {
		b[i] = byte(x)
	}
	for i, y := range c.WorkerY {
		b[20+i] = byte(y)
	}
	return b
}
