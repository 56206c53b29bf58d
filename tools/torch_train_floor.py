# The VGG-style net as a plain ANN in PyTorch: forward + backward + Adam step at
# batch 2048 (= 256 x 8), channels_last, cudnn.benchmark, CUDA events, median of
# 20 after 5 warm-ups; fp32 with TF32 off, and bf16 autocast (fp32 master
# weights), the anchors of the GPU trainer's BPTT step (neurocuda bench --train).
import statistics, torch
from torch import nn
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.backends.cudnn.benchmark = True
def conv(cin, cout): return [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
m = nn.Sequential(*conv(1, 32), *conv(32, 32), nn.AvgPool2d(2), *conv(32, 64), *conv(64, 64), nn.AvgPool2d(2),
                  nn.Flatten(), nn.Linear(3136, 256), nn.ReLU(), nn.Linear(256, 10)).cuda().to(memory_format=torch.channels_last)
opt = torch.optim.Adam(m.parameters(), 1e-4)
x = torch.rand(2048, 1, 28, 28, device="cuda").to(memory_format=torch.channels_last)
y = torch.randint(0, 10, (2048,), device="cuda")
for prec in ["fp32", "bf16"]:
    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=prec == "bf16"):
            loss = nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
    for _ in range(5): step()
    torch.cuda.synchronize()
    ts = []
    for _ in range(20):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); step(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    print(f"pytorch vgg-fmnist ANN forward+backward+adam, batch 2048, {prec}: {statistics.median(ts):.3f} ms (median of 20)")
