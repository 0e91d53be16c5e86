/* tensorctl_plot.h: bench's chart: series of y values against shared x values, written as an
 * SVG line chart with two y axes (tensorctl_plot.c). */
#ifndef TCTL_PLOT_H
#define TCTL_PLOT_H

#include <stdbool.h>
#include <stddef.h>

typedef struct tctl_series {
	const char *name, *color;
	const double *y; /* n values; NaN leaves a point out */
	bool right;	 /* on the right axis */
	bool dashed;
} tctl_series;

typedef struct tctl_plot {
	const char *title, *xlabel, *yleft, *yright;
	const double *x; /* n values, increasing */
	int n;
	bool logx; /* a log2 x axis (a doubling sweep) */
	const tctl_series *s;
	int ns;
} tctl_plot;

/* Write the chart to path; false with the reason in err. */
bool tctl_plot_svg(const char *path, const tctl_plot *p, char *err, size_t errlen);

#endif
