/* A small STREAM (McCalpin's memory bandwidth benchmark) for the matrix's end-to-end test:
 * the four kernels Copy, Scale, Add and Triad over three arrays of N doubles, NTIMES passes,
 * the first pass left out of the figures, and the summary table in stream.c 5.10's format
 * ("Function    Best Rate MB/s  Avg time     Min time     Max time"), which vmtune's STREAM
 * reader reads. Written for vmtune; the method and the table follow stream.c's own.
 *
 *   gcc -O2 -static -o stream stream.c      ./stream [N]  (default 2,000,000: 48 MB) */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NTIMES 6

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 2000000;
  if (n < 1000) {
    fprintf(stderr, "stream: N must be at least 1000\n");
    return 2;
  }
  double *a = malloc(sizeof(double) * n), *b = malloc(sizeof(double) * n),
         *c = malloc(sizeof(double) * n);
  if (!a || !b || !c) {
    fprintf(stderr, "stream: cannot allocate 3 x %ld doubles\n", n);
    return 1;
  }
  for (long j = 0; j < n; j++) {
    a[j] = 1.0;
    b[j] = 2.0;
    c[j] = 0.0;
  }
  const char *label[4] = {"Copy:      ", "Scale:     ", "Add:       ", "Triad:     "};
  const double bytes[4] = {2.0 * sizeof(double) * n, 2.0 * sizeof(double) * n,
                           3.0 * sizeof(double) * n, 3.0 * sizeof(double) * n};
  double times[4][NTIMES], scalar = 3.0;
  for (int k = 0; k < NTIMES; k++) {
    double t = now();
    for (long j = 0; j < n; j++) c[j] = a[j];
    times[0][k] = now() - t;
    t = now();
    for (long j = 0; j < n; j++) b[j] = scalar * c[j];
    times[1][k] = now() - t;
    t = now();
    for (long j = 0; j < n; j++) c[j] = a[j] + b[j];
    times[2][k] = now() - t;
    t = now();
    for (long j = 0; j < n; j++) a[j] = b[j] + scalar * c[j];
    times[3][k] = now() - t;
  }
  printf("Array size = %ld (elements), each kernel run %d times; the first is left out.\n", n,
         NTIMES);
  printf("Function    Best Rate MB/s  Avg time     Min time     Max time\n");
  for (int i = 0; i < 4; i++) {
    double sum = 0, min = FLT_MAX, max = 0;
    for (int k = 1; k < NTIMES; k++) {
      sum += times[i][k];
      if (times[i][k] < min) min = times[i][k];
      if (times[i][k] > max) max = times[i][k];
    }
    printf("%s%12.1f  %11.6f  %11.6f  %11.6f\n", label[i], 1.0e-6 * bytes[i] / min,
           sum / (NTIMES - 1), min, max);
  }
  /* the arrays' checksum keeps the compiler from dropping the kernels */
  double s = 0;
  for (long j = 0; j < n; j += n / 16) s += a[j] + b[j] + c[j];
  printf("Solution checksum %.6e\n", s);
  return 0;
}
