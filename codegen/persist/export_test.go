package persist

import (
	"github.com/tcc-dev/tcc/codegen"
	"github.com/tcc-dev/tcc/codegen/kir"
)

// CardPages is the page sizes of the tables and images buffers cardBuffers
// computes for p (what Build reserves L1 for).
func CardPages(p *kir.Program, b *codegen.Build) (tables, text int, err error) {
	c, err := cardBuffers(p, b)
	if err != nil {
		return 0, 0, err
	}
	return c.tables.PageSize, c.text.PageSize, nil
}
