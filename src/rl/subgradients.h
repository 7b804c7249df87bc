// torch autograd's subgradients where a piece of a loss is flat or kinked, which the rl layer's
// gradients follow so that they equal what torch gives for verl's code (checked against torch 1.13,
// tests/rl/torch_grad_reference.py):
//   torch.clamp(x, lo, hi)    passes the gradient where lo <= x <= hi, both bounds included, else 0
//   torch.maximum / minimum   all of it to the winner, half to each side on a tie
//   abs(x), sign(x)           sign(x) (0 at x = 0); sign has gradient 0
// Internal to src/rl.
#pragma once

namespace rf::rl {

inline double clamp_grad(double x, double lo, double hi) { return lo <= x && x <= hi ? 1.0 : 0.0; }
// The share of the gradient of torch.maximum(a, b) that goes to a (and of torch.minimum(b, a) to a).
inline double max_grad_share(double a, double b) { return a > b ? 1.0 : a < b ? 0.0 : 0.5; }
inline double sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }

}  // namespace rf::rl
