/* tensorctl_plot.c: a line chart written by hand as SVG (no dependencies): series against one x
 * axis (linear or log2), a left and a right y axis with "nice" ticks, labels and a legend. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tensorctl_plot.h"

enum { W = 860, H = 500, ML = 80, MR = 90, MT = 50, MB = 110 };

/* A tick step of about range/5: 1, 2 or 5 times a power of ten. */
static double nice_step(double range)
{
	if (!(range > 0))
		return 1;
	double raw = range / 5, p = pow(10, floor(log10(raw))), f = raw / p;
	return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

typedef struct axis {
	double lo, hi, step;
} axis;

/* 0 .. a nice top above every finite value of the series on that side. */
static axis y_axis(const tctl_series *s, int ns, int n, bool right)
{
	double hi = 0;
	for (int k = 0; k < ns; k++)
		for (int i = 0; s[k].right == right && i < n; i++)
			if (isfinite(s[k].y[i]) && s[k].y[i] > hi)
				hi = s[k].y[i];
	axis a = {0, hi > 0 ? hi : 1, 0};
	a.step = nice_step(a.hi);
	a.hi = ceil(a.hi / a.step) * a.step;
	return a;
}

static double xpos(const tctl_plot *p, double x, double lo, double hi)
{
	double f = hi > lo ? (p->logx ? (log2(x) - log2(lo)) / (log2(hi) - log2(lo))
				      : (x - lo) / (hi - lo))
			   : 0.5;
	return ML + f * (W - ML - MR);
}

static double ypos(const axis *a, double y)
{
	return MT + (1 - (y - a->lo) / (a->hi - a->lo)) * (H - MT - MB);
}

/* s with &, < and > escaped. */
static void text(FILE *f, const char *s)
{
	for (; *s; s++)
		fputs(*s == '&'	  ? "&amp;"
		      : *s == '<' ? "&lt;"
		      : *s == '>' ? "&gt;"
				  : (char[2]){*s, 0},
		      f);
}

bool tctl_plot_svg(const char *path, const tctl_plot *p, char *err, size_t errlen)
{
	FILE *f = fopen(path, "w");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return false;
	}
	double lo = p->n ? p->x[0] : 0, hi = lo;
	for (int i = 0; i < p->n; i++) {
		lo = p->x[i] < lo ? p->x[i] : lo;
		hi = p->x[i] > hi ? p->x[i] : hi;
	}
	axis ya[2] = {y_axis(p->s, p->ns, p->n, false), y_axis(p->s, p->ns, p->n, true)};
	fprintf(f,
		"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
		"viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
		"<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
		W, H, W, H);
	fprintf(f, "<text x=\"%d\" y=\"28\" text-anchor=\"middle\" font-size=\"16\">", W / 2);
	text(f, p->title);
	fputs("</text>\n", f);
	/* grid and ticks of the left axis, ticks of the right */
	for (int side = 0; side < 2; side++) {
		const axis *a = &ya[side];
		bool used = false;
		for (int k = 0; k < p->ns; k++)
			used |= p->s[k].right == side;
		if (!used)
			continue;
		for (double v = a->lo; v <= a->hi + a->step / 2; v += a->step) {
			double y = ypos(a, v);
			if (!side)
				fprintf(f,
					"<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" "
					"stroke=\"#e4e4e4\"/>\n",
					ML, y, W - MR, y);
			fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"%s\">%g</text>\n",
				side ? W - MR + 8 : ML - 8, y + 4, side ? "start" : "end", v);
		}
		fprintf(f,
			"<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\">",
			side ? W - 22 : 22, (MT + H - MB) / 2);
		text(f, side ? p->yright : p->yleft);
		fputs("</text>\n", f);
	}
	for (int i = 0; i < p->n; i++) {
		double x = xpos(p, p->x[i], lo, hi);
		fprintf(f,
			"<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#888\"/>\n"
			"<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n",
			x, H - MB, x, H - MB + 5, x, H - MB + 20, p->x[i]);
	}
	fprintf(f,
		"<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
		"stroke=\"#444\"/>\n",
		ML, MT, W - ML - MR, H - MT - MB);
	fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", (ML + W - MR) / 2,
		H - MB + 42);
	text(f, p->xlabel);
	fputs("</text>\n", f);
	for (int k = 0; k < p->ns; k++) {
		const tctl_series *s = &p->s[k];
		const axis *a = &ya[s->right];
		fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s points=\"",
			s->color, s->dashed ? " stroke-dasharray=\"6,4\"" : "");
		for (int i = 0; i < p->n; i++)
			if (isfinite(s->y[i]))
				fprintf(f, "%.1f,%.1f ", xpos(p, p->x[i], lo, hi),
					ypos(a, s->y[i]));
		fputs("\"/>\n", f);
		for (int i = 0; i < p->n; i++)
			if (isfinite(s->y[i]))
				fprintf(f,
					"<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
					xpos(p, p->x[i], lo, hi), ypos(a, s->y[i]), s->color);
		/* legend: a row under the axis label */
		int lx = ML + k * ((W - ML - MR) / (p->ns ? p->ns : 1)), ly = H - 30;
		fprintf(f,
			"<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" "
			"stroke-width=\"2\"%s/>\n<text x=\"%d\" y=\"%d\">",
			lx, ly, lx + 24, ly, s->color, s->dashed ? " stroke-dasharray=\"6,4\"" : "",
			lx + 30, ly + 4);
		text(f, s->name);
		fputs("</text>\n", f);
	}
	fputs("</svg>\n", f);
	if (fclose(f)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return false;
	}
	return true;
}
