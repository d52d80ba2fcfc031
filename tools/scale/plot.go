package main

import (
	"fmt"
	"html"
	"io"
	"math"
	"slices"
)

// markdown prints the results as the README's table.
func markdown(w io.Writer, rs []Result, fits []fit) {
	fmt.Fprintln(w, "| world | QPs | packets | set-up | run: wall | run: CPU | packets/s | peak heap | peak RSS |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, r := range rs {
		name := fmt.Sprintf("alltoall N=%d", r.N)
		switch r.Kind {
		case "stream":
			name = "2-node stream, " + sizeName(msgLen) + " WRITEs"
		case "switched":
			name = "2-node stream through a switch"
		case "idle":
			name = fmt.Sprintf("%d idle RC QPs", r.N)
		case "cluster":
			name = fmt.Sprintf("alltoall N=%d, %d parts on every core", r.N, r.Parts)
		}
		pps := "–"
		if r.Packets > 0 {
			pps = fmt.Sprintf("%.0f k", r.PktsPerS()/1e3)
		}
		fmt.Fprintf(w, "| %s | %d | %d | %.2f s | %.2f s | %.2f s | %s | %.1f MB | %.0f MB |\n", name, r.QPs, r.Packets, r.SetupS, r.WallS, r.CPUS, pps,
			float64(r.PeakHeap)/1e6, float64(r.RSS)/1e6)
	}
	fmt.Fprintln(w)
	for _, f := range fits {
		fmt.Fprintf(w, "- %s ∝ %s^%.2f\n", f.y, f.x, f.exp)
	}
}

// panel is one log-log chart of the plot.
type panel struct {
	title, xlabel, ylabel string
	kind                  string
	x, y                  func(Result) float64
	fit                   *fit
	// y2 and fit2, if set, are a second series (orange): CPU time.
	y2   func(Result) float64
	fit2 *fit
}

// plot draws two log-log charts side by side: the alltoall's wall time
// against its packets, and the idle QPs' heap against their number, each
// with its points and its fitted line, and a line of slope 1 through the
// first point for comparison.
func plot(w io.Writer, rs []Result, fits []fit) {
	const pw, ph = 460, 340
	findFit := func(y string) *fit {
		for i := range fits {
			if fits[i].y == y {
				return &fits[i]
			}
		}
		return nil
	}
	ps := []panel{
		{"alltoall, N = 16 … 1024: wall (blue) and CPU (orange) time", "simulated packets", "time (s)", "alltoall",
			func(r Result) float64 { return float64(r.Packets) }, func(r Result) float64 { return r.WallS }, findFit("alltoall wall time"),
			func(r Result) float64 { return r.CPUS }, findFit("alltoall CPU time")},
		{"idle RC QPs on one host: heap", "QPs", "live heap (bytes)", "idle",
			func(r Result) float64 { return float64(r.QPs) }, func(r Result) float64 { return float64(r.PeakHeap) }, findFit("idle-QP heap"), nil, nil},
	}
	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", pw*len(ps), ph)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	for i, p := range ps {
		drawPanel(w, float64(i*pw), pw, ph, p, rs)
	}
	fmt.Fprintln(w, "</svg>")
}

// drawPanel draws one chart with its top-left corner at (x0, 0).
func drawPanel(w io.Writer, x0 float64, pw, ph int, p panel, rs []Result) {
	var xs, ys, xs2, ys2 []float64
	for _, r := range rs {
		if r.Kind == p.kind && p.x(r) > 0 && p.y(r) > 0 {
			xs, ys = append(xs, p.x(r)), append(ys, p.y(r))
		}
		if p.y2 != nil && r.Kind == p.kind && p.x(r) > 0 && p.y2(r) > 0 {
			xs2, ys2 = append(xs2, p.x(r)), append(ys2, p.y2(r))
		}
	}
	if len(xs) == 0 {
		return
	}
	all := append(slices.Clone(ys), ys2...)
	lo := func(v []float64) float64 { return math.Floor(math.Log10(minOf(v))) }
	hi := func(v []float64) float64 { return math.Ceil(math.Log10(maxOf(v))) }
	xlo, xhi, ylo, yhi := lo(xs), max(hi(xs), lo(xs)+1), lo(all), max(hi(all), lo(all)+1)
	const ml, mr, mt, mb = 70, 20, 30, 45
	left, right, top, bottom := x0+ml, x0+float64(pw-mr), float64(mt), float64(ph-mb)
	px := func(v float64) float64 { return left + (math.Log10(v)-xlo)/(xhi-xlo)*(right-left) }
	py := func(v float64) float64 { return bottom - (math.Log10(v)-ylo)/(yhi-ylo)*(bottom-top) }
	fmt.Fprintf(w, `<text x="%.0f" y="18" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(p.title))
	fmt.Fprintf(w, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", left, top, right-left, bottom-top)
	for e := xlo; e <= xhi; e++ {
		x := px(math.Pow(10, e))
		fmt.Fprintf(w, `<line x1="%.1f" y1="%.0f" x2="%.1f" y2="%.0f" stroke="#ddd"/><text x="%.1f" y="%.0f" text-anchor="middle">1e%d</text>`+"\n",
			x, top, x, bottom, x, bottom+15, int(e))
	}
	for e := ylo; e <= yhi; e++ {
		y := py(math.Pow(10, e))
		fmt.Fprintf(w, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#ddd"/><text x="%.0f" y="%.1f" text-anchor="end">1e%d</text>`+"\n",
			left, y, right, y, left-5, y+4, int(e))
	}
	fmt.Fprintf(w, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", (left+right)/2, ph-8, html.EscapeString(p.xlabel))
	fmt.Fprintf(w, `<text transform="translate(%.0f %.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0+15, (top+bottom)/2, html.EscapeString(p.ylabel))
	// Slope 1 through the first point: growth no faster than the work.
	x1, y1 := xs[0], ys[0]
	x2 := math.Pow(10, xhi)
	fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#aaa" stroke-dasharray="4 3"/>`+"\n", px(x1), py(y1), px(x2), py(y1*x2/x1))
	for k, s := range []struct {
		f      *fit
		xs, ys []float64
		color  string
	}{{p.fit, xs, ys, "#36c"}, {p.fit2, xs2, ys2, "#e80"}} {
		if f := s.f; f != nil {
			a, b := math.Pow(10, xlo), math.Pow(10, xhi)
			ya, yb := math.Exp(f.c)*math.Pow(a, f.exp), math.Exp(f.c)*math.Pow(b, f.exp)
			fmt.Fprintf(w, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>`+"\n", px(a), py(ya), px(b), py(yb), s.color)
			fmt.Fprintf(w, `<text x="%.0f" y="%.0f" fill="%s">fit: exponent %.2f%s</text>`+"\n", left+8, top+16+float64(k)*16, s.color, f.exp,
				map[bool]string{true: " (dashed: 1)"}[k == 0])
		}
		for i := range s.xs {
			fmt.Fprintf(w, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s"/>`+"\n", px(s.xs[i]), py(s.ys[i]), s.color)
		}
	}
}

func minOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = min(m, x)
	}
	return m
}

func maxOf(v []float64) float64 {
	m := v[0]
	for _, x := range v {
		m = max(m, x)
	}
	return m
}

// sizeName is a WRITE's length as the table names it: "4 KiB", "64 B".
func sizeName(n int) string {
	if n >= 1024 && n%1024 == 0 {
		return fmt.Sprintf("%d KiB", n/1024)
	}
	return fmt.Sprintf("%d B", n)
}
