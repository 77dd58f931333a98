# A model of e4m3-32-step64.patch's synchronisation (data/results/h100/2026-12-07-step64-landing/, the 32-row form's
# prefix CTA): its eight warps as coroutines under random scheduling, mbarriers with try_wait.parity's semantics (a
# waiter also checks that the phase it waits for is the one that completed: no ABA), the named barriers, cp.async
# copies that land at random later points, and every shared buffer (ring slots per PV warp's quarter, P, the rescale
# factors, the row maxima) tagged by the tile or step it holds, so that a read of the wrong tile or an overwrite
# before every reader is done raises. Written by a review helper on 2026-12-07; pure Python, no GPU. The rotated PV
# loops (--v-early, --v-early-split) added on 2026-12-08 (../2026-12-08-e4m3-32-v-early-model/).
#   python3 model.py [--slots N] [--drop-kempty | --previous-p] [--v-early | --v-early-split]
#   --drop-kempty: the PV warps skip the K_EMPTY wait (must fail); --previous-p: no K_EMPTY, a step's slots refilled
#   once P of the step before is in; --v-early: after P(st), the next step's V read tile by tile between the step's
#   two tiles' MMAs, then the next step's slots refilled (step 0's V and refill before the loop); --v-early-split: the
#   same with each tile's slot refilled as soon as its V is read (its own K_EMPTY wait and PV barrier)
import argparse, random, sys
_ap = argparse.ArgumentParser()
_ap.add_argument("--slots", type=int, default=4)
_ap.add_argument("--drop-kempty", action="store_true")
_ap.add_argument("--previous-p", action="store_true",
                 help="no K_EMPTY: the PV warps refill a step's slots once P of the step before is in (step 0: P(0))")
_ap.add_argument("--v-early", action="store_true")
_ap.add_argument("--v-early-split", action="store_true")
_args = _ap.parse_args()
V_EARLY=_args.v_early or _args.v_early_split; V_SPLIT=_args.v_early_split
SLOTS=_args.slots; STEP=2; DROP_KEMPTY=_args.drop_kempty or _args.previous_p; PREVIOUS_P=_args.previous_p
class Bug(Exception): pass
class MB:
    def __init__(s,name,count): s.name=name; s.count=count; s.pending=count; s.phase=0
    def arrive(s,n=32):
        s.pending-=n
        if s.pending<0: raise Bug(f"{s.name}: over-arrival")
        if s.pending==0: s.phase+=1; s.pending=s.count
def run(T, seed):
    rnd=random.Random(seed)
    full=[MB(f"FULL{i}",128) for i in range(SLOTS)]
    kemp=[MB(f"KEMPTY{i}",64) for i in range(SLOTS)]
    pfull=[MB(f"PFULL{i}",128) for i in range(2)]
    pemp=[MB(f"PEMPTY{i}",128) for i in range(2)]
    stats=MB("STATS",128)
    slot=[[None]*4 for _ in range(SLOTS)]   # per PV-warp quarter: tile id or ('pend',t)
    async_q=[]  # (slot, pw, t)
    pbuf={}; pread={}; xmax={}; xread={}; alpha={}; aread={}
    named={}  # id -> count arrived in current generation, gen
    gen={}
    S=(T+STEP-1)//STEP
    def W(mb,par,k):  # blocking wait with phase check
        while (mb.phase&1)==par: yield 'blocked'
        if mb.phase!=k+1: raise Bug(f"{mb.name}: wait for phase {k} passed at phase {mb.phase}")
    def BAR(i,n):
        g=gen.get(i,0); named[i]=named.get(i,0)+32
        if named[i]==n: named[i]=0; gen[i]=g+1
        while gen.get(i,0)==g: yield 'blocked'
    def rd(s_,t,who):
        for q in range(4):
            if slot[s_][q]!=t: raise Bug(f"{who} reads slot {s_} expecting tile {t}, quarter {q} holds {slot[s_][q]}")
    def qk(q):
        mq,kh=q&1,q>>1
        tile_of=lambda s: min(STEP*s+kh,T-1)
        t=tile_of(0); yield from W(full[t%SLOTS],(t//SLOTS)&1,t//SLOTS); rd(t%SLOTS,t,f"qk{q}"); sc=t
        yield 'step'
        for s in range(S):
            more=s+1<S; b=s&1
            assert sc==tile_of(s)
            if STEP*s+kh<T: kemp[(STEP*s+kh)%SLOTS].arrive()
            k=(b,kh,mq)
            if k in xmax and xread.get(k)!=xmax[k]: raise Bug(f"xmax {k} overwritten before read")
            xmax[k]=s; yield 'step'
            yield from BAR(1+mq,64)
            k2=(b,kh^1,mq)
            if xmax.get(k2)!=s: raise Bug(f"xmax partner {k2} holds {xmax.get(k2)} at step {s}")
            xread[k2]=s; yield 'step'
            tn=tile_of(s+1 if more else s)
            if more: yield from W(full[tn%SLOTS],(tn//SLOTS)&1,tn//SLOTS)
            rd(tn%SLOTS,tn,f"qk{q} step{s}"); sc=tn; yield 'step'
            if s>=2: yield from W(pemp[s&1],((s>>1)+1)&1,(s>>1)-1)
            k=(b,mq,kh)
            if k in pbuf and pread.get(k,set())!={4,5,6,7}: raise Bug(f"P {k} overwritten before PV read it")
            pbuf[k]=s; pread[k]=set()
            if kh==0:
                k=(b,mq)
                if k in alpha and aread.get(k,set())!={4,5,6,7}: raise Bug("alpha overwritten")
                alpha[k]=s; aread[k]=set()
            pfull[s&1].arrive(); yield 'step'
        stats.arrive()
    def pv(w):
        pw=w-4
        def load(t):
            s_=t%SLOTS; slot[s_][pw]=('pend',t); async_q.append((s_,pw,t))
        for t in range(min(SLOTS,T)): load(t)
        yield 'step'
        def read_v(t):
            yield from W(full[t%SLOTS],(t//SLOTS)&1,t//SLOTS); rd(t%SLOTS,t,f"pv{w} V"); yield 'step'
        def refill_step(t0):
            if t0+SLOTS<T:
                both=t0+1+SLOTS<T
                if not DROP_KEMPTY:
                    yield from W(kemp[t0%SLOTS],(t0//SLOTS)&1,t0//SLOTS)
                    if both: yield from W(kemp[(t0+1)%SLOTS],((t0+1)//SLOTS)&1,(t0+1)//SLOTS)
                yield from BAR(3,128)
                load(t0+SLOTS)
                if both: load(t0+1+SLOTS)
                yield 'step'
        def refill_tile(t):
            if t+SLOTS<T:
                if not DROP_KEMPTY: yield from W(kemp[t%SLOTS],(t//SLOTS)&1,t//SLOTS)
                yield from BAR(3,128)
                load(t+SLOTS); yield 'step'
        def take_p(st,wait=True):  # P(st) and its rescale factors, then P_EMPTY for P(st + 2)
            b=st&1
            if wait: yield from W(pfull[st&1],(st>>1)&1,st>>1)
            for m in range(2):
                if alpha.get((b,m))!=st: raise Bug(f"alpha {(b,m)} {alpha.get((b,m))} != {st}")
                aread[(b,m)].add(w)
            for m in range(2):
                for kk in range(2):
                    if pbuf.get((b,m,kk))!=st: raise Bug(f"P {(b,m,kk)} holds {pbuf.get((b,m,kk))} at PV step {st}")
                    pread[(b,m,kk)].add(w)
            if st+2<S: pemp[st&1].arrive()
            yield 'step'
        if not V_EARLY:  # main's order: the step's V, its refill, then P
            for st in range(S):
                t0=STEP*st
                if PREVIOUS_P and st==0: yield from W(pfull[0],0,0)
                yield from read_v(t0)
                if t0+1<T: yield from read_v(t0+1)
                yield from refill_step(t0)
                yield from take_p(st,wait=not (PREVIOUS_P and st==0))
        else:  # the rotated order: P, then the next step's V tile by tile between this step's tiles' MMAs
            yield from read_v(0)
            if T>1: yield from read_v(1)
            yield from refill_step(0)
            for st in range(S):
                t0=STEP*st; nxt=st+1<S
                yield from take_p(st)
                for kk in range(2):  # tile kk's MMAs (registers only), then the next step's tile kk
                    if nxt and (kk==0 or t0+3<T):
                        yield from read_v(t0+2+kk)
                        if V_SPLIT: yield from refill_tile(t0+2+kk)
                if nxt and not V_SPLIT: yield from refill_step(t0+2)
        yield from W(stats,0,0)
    gens={w:(qk(w) if w<4 else pv(w)) for w in range(8)}
    live=set(gens)
    stuck=0
    while live or async_q:
        choices=list(live)+(['async'] if async_q else [])
        c=rnd.choice(choices)
        if c=='async':
            i=rnd.randrange(len(async_q)); s_,pw,t=async_q.pop(i)
            if slot[s_][pw]!=('pend',t): raise Bug("slot clobbered")
            slot[s_][pw]=t; full[s_].arrive(); stuck=0; continue
        try:
            r=next(gens[c])
            stuck = stuck+1 if r=='blocked' else 0
        except StopIteration:
            live.discard(c); stuck=0
        if stuck>5000: raise Bug(f"deadlock: live={sorted(live)} phases full={[m.phase for m in full]} kemp={[m.phase for m in kemp]}")
    return True
bad=0
for T in list(range(1,41))+[63,64,65,100,101,257]:
    for seed in range(60):
        try: run(T,seed)
        except Bug as e:
            print("T",T,"seed",seed,e); bad+=1; break
print(f"slots {SLOTS}, drop_kempty {DROP_KEMPTY}, previous_p {PREVIOUS_P}, v_early {V_EARLY}, split {V_SPLIT}: "
      "done, failures:", bad)
sys.exit(1 if bad else 0)
