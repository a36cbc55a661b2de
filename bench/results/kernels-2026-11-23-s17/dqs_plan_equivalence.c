/*
 * dqs_plan_equivalence.c — checks that kernels/zk_dqs_plan.h's zk_dqs_cta_part computes what dqs_kernel computed
 * inline when it ran on the GPUs (calls 7 and 8, commit 553471a), before the plan moved into the header: the
 * same slab elements, code and scale byte ranges and shared offset, on random chunks, blocks, slabs and CTAs.
 * Run on the development machine (x86-64, gcc, no GPU), 2026-11-23, from the repository root:
 *   gcc -O2 -Ikernels -o /tmp/dqseq bench/results/kernels-2026-11-23-s17/dqs_plan_equivalence.c && /tmp/dqseq
 */
#include <stdio.h>
#include <stdint.h>
#include "zk_dqs_plan.h"
static uint64_t rs=0x1234567;
static uint64_t xr(void){rs^=rs<<13;rs^=rs>>7;rs^=rs<<17;return rs;}
int main(void){
  long n=0,bad=0;
  for(int t=0;t<2000000;t++){
    int bits = xr()%2?4:8; int lgb = 5 + xr()%9; uint64_t n_out = 1 + xr()% (1ull<<30);
    uint64_t pay = zk_payload_bytes(n_out + xr()%1000, bits);
    uint64_t gran = zk_dqs_gran(lgb); uint64_t slab_e = gran*(1+xr()%400); uint64_t e_base = gran*(xr()%(n_out/gran+1));
    uint64_t cta = xr()%200;
    /* the old inline form */
    uint64_t e_lo = e_base + cta*slab_e; if (e_lo >= n_out) { struct zk_dqs_cta p; if (zk_dqs_cta_part(n_out,pay,bits,lgb,e_base,slab_e,cta,&p)) bad++; continue; }
    uint64_t e_hi = e_lo + slab_e < n_out ? e_lo + slab_e : n_out;
    uint64_t c_lo = e_lo*bits/8, b_lo = e_lo>>lgb;
    uint64_t c_bytes = (((e_hi-e_lo)*bits+7)/8+15)&~(uint64_t)15; if (c_lo + c_bytes > pay) c_bytes = pay - c_lo;
    uint64_t s_bytes = ((((e_hi-1)>>lgb)+1-b_lo)*4+15)&~(uint64_t)15;
    uint64_t s_off = slab_e*bits/8;
    struct zk_dqs_cta p; int ok = zk_dqs_cta_part(n_out,pay,bits,lgb,e_base,slab_e,cta,&p); n++;
    if(!ok||p.e_lo!=e_lo||p.e_hi!=e_hi||p.c_lo!=c_lo||p.c_bytes!=c_bytes||p.b_lo!=b_lo||p.s_bytes!=s_bytes||p.s_off!=s_off) bad++;
  }
  printf("%ld cases, %ld differ\n", n, bad); return bad!=0;
}
/* Output: 1508374 cases, 0 differ */
