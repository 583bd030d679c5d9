/* The machine's fp32 FMA peak: every OpenMP thread runs 12 independent FMA chains
 * (enough to cover the FMA latency on two pipes) of the widest vectors the machine has
 * (AVX-512 where -march=native enables it, AVX2 otherwise), and the FLOP rate of all
 * threads together is printed. The ceiling the tuned kernels are compared with in
 * BENCHMARKS.md:
 *
 *   gcc -O2 -march=native -fopenmp bench/fma_peak.c -o /tmp/fma_peak
 *   OMP_NUM_THREADS=1 /tmp/fma_peak; OMP_NUM_THREADS=2 /tmp/fma_peak
 */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>

#define CHAINS 12

#ifdef __AVX512F__
typedef __m512 vec;
#define LANES 16
#define ISA "AVX-512"
#define SET1 _mm512_set1_ps
#define FMADD _mm512_fmadd_ps
static float hsum(vec v) { return _mm512_reduce_add_ps(v); }
#else
typedef __m256 vec;
#define LANES 8
#define ISA "AVX2"
#define SET1 _mm256_set1_ps
#define FMADD _mm256_fmadd_ps
static float hsum(vec v) {
  float x[8];
  _mm256_storeu_ps(x, v);
  return x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7];
}
#endif

int main(void) {
  const long iters = 50000000;
  double flop = 0.0;
  float sink = 0.0f;
  double t0 = omp_get_wtime();
#pragma omp parallel reduction(+ : flop, sink)
  {
    vec acc[CHAINS];
    const vec b = SET1(1.0000001f), c = SET1(1e-7f);
    for (int i = 0; i < CHAINS; i++) acc[i] = SET1((float)i);
    for (long k = 0; k < iters; k++) {
#pragma GCC unroll 12
      for (int i = 0; i < CHAINS; i++) acc[i] = FMADD(acc[i], b, c);
    }
    for (int i = 0; i < CHAINS; i++) sink += hsum(acc[i]);
    flop = (double)iters * CHAINS * LANES * 2;
  }
  double t = omp_get_wtime() - t0;
  printf("%d threads, %s: %.1f GFLOPS (checksum %g)\n", omp_get_max_threads(), ISA,
         flop / t / 1e9, (double)sink);
  return 0;
}
