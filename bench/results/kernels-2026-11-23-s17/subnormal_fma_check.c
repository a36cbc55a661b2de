/*
 * subnormal_fma_check.c — the exactness claim behind the ZK_PROBE_SUB4=2 probe (int4-subnormal-probes-attempt.patch):
 * a biased int4 code u = q + 8 of nibble n (n < 4) masked in place reads as the fp32 u * 2^(4n - 149), and
 * fma(u * 2^(4n-149), s * 2^(149-K), acc * 2^(4n-K)) equals 2^(4n-K) * fma(u, s, acc) while every nonzero scale's
 * exponent lies in [K - 126, K - 34] (K from the largest scale + 74, at least 22). This program draws random
 * scales (wide and narrow exponent spreads, zeros, subnormals) and code words for k = 1..16 chunks, runs both
 * chains on the CPU in fp32 (no flush-to-zero) and counts the cases where the fast way applies and the bytes differ.
 * Run on the development machine (x86-64, gcc, no GPU), 2026-11-23, from the repository root:
 *   gcc -O2 -ffp-contract=off -Ikernels -o /tmp/subcheck bench/results/kernels-2026-11-23-s17/subnormal_fma_check.c -lm
 *   /tmp/subcheck
 * Output (that run): see the end of this file.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static float asf(uint32_t u){float f;memcpy(&f,&u,4);return f;}
static uint32_t asu(float f){uint32_t u;memcpy(&u,&f,4);return u;}
static uint64_t rs=88172645463325252ull;
static uint64_t xr(void){rs^=rs<<13;rs^=rs>>7;rs^=rs<<17;return rs;}
static float p2(int k){return asf((uint32_t)(k+127)<<23);}
int main(void){
  long bad=0,fastn=0,tot=0;
  for(int trial=0;trial<2000000;trial++){
    int k=1+xr()%16; float s[16]; uint32_t w[16];
    int e0=(int)(xr()%250)-126; int spread=xr()%4==0? (int)(xr()%120) : (int)(xr()%20);
    for(int j=0;j<k;j++){
      int e=e0+(int)(xr()%(spread+1))-spread/2; if(e<-126)e=-126; if(e>127)e=127;
      uint32_t m=xr()&0x7FFFFF; uint32_t E=e+127;
      s[j]=asf((E<<23)|m);
      if(xr()%10==0)s[j]=0; if(xr()%50==0)s[j]=asf(xr()&0x7FFFFF); /* subnormal */
      w[j]=(uint32_t)xr();
    }
    /* reference: plain biased chain, per code n */
    for(int n=0;n<8;n++){
      float acc=0;
      for(int j=0;j<k;j++){int u=(int)((w[j]>>(4*n))&15)^8; acc=fmaf((float)u,s[j],acc);}
      /* scaled: K from max exponent of all (emulate first batch = all) */
      uint32_t bmax=0; for(int j=0;j<k;j++){uint32_t a=asu(s[j])&0x7FFFFFFF; if(a>bmax)bmax=a;}
      int K=(int)(bmax>>23)-53; int plain=K>127; if(K<22)K=22;
      int fast=!plain;
      for(int j=0;j<k;j++){uint32_t a=asu(s[j])&0x7FFFFFFF,E=a>>23; fast=fast&&(a==0||(E>=1&&E-(uint32_t)(K+1)<=92u));}
      tot++;
      if(!fast)continue;
      fastn++;
      float f=p2(149-K); float ac=0;
      for(int j=0;j<k;j++){
        uint32_t c=w[j]^0x88888888u, ch=c>>16; int nn=n%4; uint32_t src=n<4?c:ch;
        float x=asf(src&(0xFu<<4*nn)); ac=fmaf(x,s[j]*f,ac);
      }
      ac=ac*p2(K-4*(n%4));
      if(asu(ac)!=asu(acc)){ if(bad<5)printf("mismatch k=%d n=%d %a vs %a K=%d\n",k,n,ac,acc,K); bad++;}
    }
  }
  printf("total %ld fast %ld bad %ld\n",tot,fastn,bad);
  return bad!=0;
}
/* Output: total 16000000 fast 7411840 bad 0 */
