# median.awk: med(s), the median of the numbers in the space-separated string s (an insertion
# sort), for the compare scripts' tables: awk -f bench/median.awk -f /dev/stdin FILE <<'EOF' ...
function med(s,   a, n, i, j, t) { n = split(s, a, " ");
	for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
