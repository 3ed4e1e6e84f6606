"""Policy-gradient training with fiamma.distributions, nn, optim and autograd together, in the
shape of pytorch/examples' reinforcement_learning (REINFORCE and actor-critic on CartPole):
a Categorical policy samples actions, log_prob(action) carries the gradient. CartPole is a
small NumPy implementation of the classic cart-pole dynamics (Barto, Sutton and Anderson
1983; the constants of gymnasium's CartPole-v1), so the test needs no gym install."""

import math

import numpy as np

import fiamma
import fiamma.nn as nn
import fiamma.nn.functional as F
from fiamma import optim
from fiamma.distributions import Categorical


class CartPole:
    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    theta_limit, x_limit, max_steps = 12 * 2 * math.pi / 360, 2.4, 500

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        self.steps = 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, theta, theta_dot = self.state
        force = self.force_mag if action == 1 else -self.force_mag
        total_mass = self.masscart + self.masspole
        pml = self.masspole * self.length
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + pml * theta_dot ** 2 * sin) / total_mass
        theta_acc = (self.gravity * sin - cos * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * cos ** 2 / total_mass))
        x_acc = temp - pml * theta_acc * cos / total_mass
        x, x_dot = x + self.tau * x_dot, x_dot + self.tau * x_acc
        theta, theta_dot = theta + self.tau * theta_dot, theta_dot + self.tau * theta_acc
        self.state = np.array([x, x_dot, theta, theta_dot])
        self.steps += 1
        done = abs(x) > self.x_limit or abs(theta) > self.theta_limit
        return self.state.astype(np.float32), 1.0, done, self.steps >= self.max_steps


def _discounted(rewards, gamma=0.99):
    out, running = [], 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        out.append(running)
    ret = fiamma.tensor(out[::-1])
    return (ret - ret.mean()) / (ret.std() + 1e-6)


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 64)
        self.actor = nn.Linear(64, 2)
        self.critic = nn.Linear(64, 1)

    def forward(self, x):
        h = F.relu(self.hidden(x))
        return F.softmax(self.actor(h), dim=-1), self.critic(h)


def _run(episodes, actor_critic, seed):
    fiamma.manual_seed(seed)
    env = CartPole(seed)
    model = ActorCritic()
    opt = optim.Adam(model.parameters(), lr=3e-2 if actor_critic else 1e-2)
    lengths = []
    for _ in range(episodes):
        state, log_probs, values, rewards = env.reset(), [], [], []
        while True:
            probs, value = model(fiamma.from_numpy(state))
            dist = Categorical(probs)
            action = dist.sample()
            log_probs.append(dist.log_prob(action))
            values.append(value)
            state, reward, done, truncated = env.step(action.item())
            rewards.append(reward)
            if done or truncated:
                break
        returns = _discounted(rewards)
        losses = []
        for lp, v, r in zip(log_probs, values, returns):
            advantage = r - v.item() if actor_critic else r
            losses.append(-lp * advantage)
            if actor_critic:
                losses.append(F.smooth_l1_loss(v, r.reshape(1)))
        opt.zero_grad()
        loss = fiamma.stack(losses).sum()
        loss.backward()
        assert math.isfinite(loss.item())
        opt.step()
        lengths.append(len(rewards))
    return lengths


def test_actor_critic_learns_to_balance():
    lengths = _run(60, actor_critic=True, seed=543)
    assert len(lengths) == 60
    # a random policy keeps the pole up for about 20 steps; this seed reaches ~100 on average
    # over its last 20 episodes (a deterministic run: fixed seeds for fiamma and the env)
    assert np.mean(lengths[-20:]) > 2 * np.mean(lengths[:20])
    assert max(lengths[-20:]) >= 100


def test_reinforce_runs_and_updates_the_policy():
    fiamma.manual_seed(0)
    lengths = _run(15, actor_critic=False, seed=1)
    assert len(lengths) == 15 and min(lengths) >= 1
