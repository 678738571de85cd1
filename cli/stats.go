package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/leashd/leash/client"
)

// barWidth is the widest bar of the stats chart, in characters.
const barWidth = 40

func runStats(ctx context.Context, c *command, a []string, f *flags) int {
	st, err := c.c.Stats(ctx, a[0])
	if err != nil {
		return c.fail(err)
	}
	c.print(st, renderStats(st))
	return ExitOK
}

// renderStats draws the 30 days as horizontal bars (allowed in █, blocked in ░, scaled
// to the busiest day) and the month's total against the quota and the hard cap.
func renderStats(st *client.Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s decisions in 30 days, %s blocked\n\n", st.Namespace, group(st.Total), group(st.Blocked))
	var peak int64
	for _, d := range st.Days {
		peak = max(peak, d.Total)
	}
	for _, d := range st.Days {
		allowed, blocked := bar(d.Total-d.Blocked, peak), bar(d.Blocked, peak)
		line := strings.Repeat("█", allowed) + strings.Repeat("░", blocked)
		fmt.Fprintf(&b, "%s %-*s %s", d.Day, barWidth, line, group(d.Total))
		if d.Blocked > 0 {
			fmt.Fprintf(&b, " (%s blocked)", group(d.Blocked))
		}
		b.WriteByte('\n')
	}
	m := st.Month
	fmt.Fprintf(&b, "\nmonth %s (all namespaces): %s of quota %s (%s)", m.Month, group(m.Total), group(m.Quota), percent(m.Total, m.Quota))
	if m.OverQuota {
		b.WriteString("  OVER QUOTA")
	}
	b.WriteByte('\n')
	if m.HardCap == nil {
		b.WriteString("hard cap: none\n")
	} else {
		fmt.Fprintf(&b, "hard cap: %s (%s used)", group(*m.HardCap), percent(m.Total, *m.HardCap))
		if m.Total >= *m.HardCap {
			b.WriteString("  REACHED: checks and leases answer 429 until the month ends")
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// bar is v's share of peak in characters; any v > 0 gets at least one.
func bar(v, peak int64) int {
	if v <= 0 || peak <= 0 {
		return 0
	}
	return max(1, int(v*barWidth/peak))
}

// group writes n with thousands separators.
func group(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	if neg {
		s = "-" + s
	}
	return s
}

func percent(n, of int64) string {
	if of <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", float64(n)*100/float64(of))
}
