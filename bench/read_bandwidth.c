/* Read bandwidth of a buffer of N MiB read over and over by two OpenMP threads (each its
 * half, eight independent vector sums so that the adds' latency is not the bound), as an
 * RNN's recurrent product reads its weights each step: the ceiling its kernels are
 * compared with in BENCHMARKS.md (AVX-512 only).
 *
 *   gcc -O3 -march=native -fopenmp bench/read_bandwidth.c -o /tmp/bw
 *   /tmp/bw 4 2000    # MiB, passes per timing (the best of five timings)
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char** argv) {
  size_t mib = argc > 1 ? atoi(argv[1]) : 4;
  int reps = argc > 2 ? atoi(argv[2]) : 2000;
  size_t n = mib * 1024 * 1024 / 4;
  float* a = aligned_alloc(64, n * 4);
  for (size_t i = 0; i < n; i++) a[i] = (float)(i % 7);
  float sink = 0;
  double best = 1e9;
  for (int trial = 0; trial < 5; trial++) {
    double t0 = omp_get_wtime();
    for (int r = 0; r < reps; r++) {
      #pragma omp parallel for num_threads(2) schedule(static) reduction(+:sink)
      for (int part = 0; part < 64; part++) {
        __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0, s4 = s0, s5 = s0, s6 = s0, s7 = s0;
        const float* p = a + part * (n / 64);
        for (size_t i = 0; i < n / 64; i += 128) {
          s0 = _mm512_add_ps(s0, _mm512_load_ps(p + i));
          s1 = _mm512_add_ps(s1, _mm512_load_ps(p + i + 16));
          s2 = _mm512_add_ps(s2, _mm512_load_ps(p + i + 32));
          s3 = _mm512_add_ps(s3, _mm512_load_ps(p + i + 48));
          s4 = _mm512_add_ps(s4, _mm512_load_ps(p + i + 64));
          s5 = _mm512_add_ps(s5, _mm512_load_ps(p + i + 80));
          s6 = _mm512_add_ps(s6, _mm512_load_ps(p + i + 96));
          s7 = _mm512_add_ps(s7, _mm512_load_ps(p + i + 112));
        }
        sink += _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)), _mm512_add_ps(_mm512_add_ps(s4, s5), _mm512_add_ps(s6, s7))));
      }
    }
    double dt = (omp_get_wtime() - t0) / reps;
    if (dt < best) best = dt;
  }
  printf("%zu MiB: %.2f us a pass, %.1f GB/s (sink %g)\n", mib, best * 1e6, n * 4 / best / 1e9, sink);
}
