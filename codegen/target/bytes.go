package target

import "fmt"

// HumanBytes formats n bytes for a reader: "N B" below 1 KiB, else KiB
// or MiB with one decimal, or GiB with two from 1 GiB (binary units, as
// the DRAM capacities and checkpoint sizes tcc prints).
func HumanBytes(n int64) string {
	switch a := max(n, -n); {
	case a >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case a >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case a >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
