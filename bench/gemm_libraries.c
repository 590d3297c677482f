// sgemm and dgemm GFLOP/s (1 thread, the median of 15 runs) of two BLAS libraries from Debian
// through the same cblas calls: issue 19's "if another BLAS serves better, measure it".
//   gcc -O2 bench/gemm_libraries.c -o gemm_openblas -I/usr/include/x86_64-linux-gnu/openblas-pthread -lopenblas
//   gcc -O2 bench/gemm_libraries.c -o gemm_blis -I/usr/include/blis -lblis    (apt install libblis-dev)
//   OPENBLAS_NUM_THREADS=1 BLIS_NUM_THREADS=1 ./gemm_openblas; ... ./gemm_blis
// Shapes: the 1024 x 1024 x 64 and a large square, then char_gpt's projection and MLP
// products (B T = 768 rows). Results in bench/RESULTS.md.
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(void){
  int shapes[][3]={{1024,1024,64},{1024,1024,1024},{768,384,128},{768,128,512}};
  for(int s=0;s<4;s++){int m=shapes[s][0],n=shapes[s][1],k=shapes[s][2];
    float*a=malloc(4L*m*k),*b=malloc(4L*k*n),*c=malloc(4L*m*n); double*A=malloc(8L*m*k),*B=malloc(8L*k*n),*C=malloc(8L*m*n);
    for(long i=0;i<(long)m*k;i++){a[i]=1e-3f*(i%97);A[i]=a[i];} for(long i=0;i<(long)k*n;i++){b[i]=1e-3f*(i%89);B[i]=b[i];}
    double ts[15],td[15]; int reps=(long)m*n*k>1e8?5:50;
    for(int r=0;r<15;r++){double t0=now();for(int q=0;q<reps;q++)cblas_sgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,m,n,k,1,a,k,b,n,0,c,n);ts[r]=(now()-t0)/reps;
      t0=now();for(int q=0;q<reps;q++)cblas_dgemm(CblasRowMajor,CblasNoTrans,CblasNoTrans,m,n,k,1,A,k,B,n,0,C,n);td[r]=(now()-t0)/reps;}
    qsort(ts,15,8,cmp);qsort(td,15,8,cmp);
    printf("%dx%dx%d sgemm %.1f GFLOP/s dgemm %.1f GFLOP/s\n",m,n,k,2.0*m*n*k/ts[7]*1e-9,2.0*m*n*k/td[7]*1e-9);}
}
