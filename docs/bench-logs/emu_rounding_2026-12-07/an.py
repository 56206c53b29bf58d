import gzip, json, sys, os, struct, array
os.chdir('/tmp/emu_runs')
lab=gzip.open('/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz').read()[8:]
def load(n):
    b=open(n+'.dump','rb').read(); o=0; preds=None
    while o<len(b):
        T,N,C=struct.unpack_from('3i',b,o); o+=12
        x=array.array('f'); x.frombytes(b[o:o+4*T*N*C]); o+=4*T*N*C
        if preds is None: preds=[[] for _ in range(T)]
        for s in range(N):
            cum=[0.0]*C
            for t in range(T):
                r=(t*N+s)*C
                best=0
                for k in range(C):
                    cum[k]+=x[r+k]
                    if cum[k]>cum[best]: best=k
                preds[t].append(best)
    return preds
def acc(p): return [sum(1 for i,v in enumerate(pt) if v==lab[i])/len(pt) for pt in p]
base=load('baseline'); ab=acc(base)
print("baseline acc", " ".join(f"{100*x:.2f}" for x in ab))
print(f"{'variant':17s} {'delta by step (points)':47s} max|d|  flips by step (pred != baseline, of 10000)")
for n in sys.argv[1:]:
    p=load(n); a=acc(p); d=[100*(x-y) for x,y in zip(a,ab)]
    js=json.load(open(n+'.json'))['accuracy_by_step']
    assert all(abs(u-v)<1e-9 for u,v in zip(js,a)), (n,js,a)
    fl=[sum(1 for u,v in zip(pt,bt) if u!=v) for pt,bt in zip(p,base)]
    print(f"{n:17s} "+" ".join(f"{x:+.2f}" for x in d)+f"  {max(map(abs,d)):.2f}   "+" ".join(f"{x:3d}" for x in fl), flush=True)
