"""Actor-critic (REINFORCE with a learned baseline) in the style of pytorch/examples'
reinforcement_learning/actor_critic.py: a two-headed policy/value network, actions sampled
from torch.distributions.Categorical, discounted normalised returns, smooth L1 value loss,
running reward logging. The environment is a small cart-pole written here (the classic
equations), so no gym is needed."""

import argparse
import math
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.distributions import Categorical

SavedAction = namedtuple("SavedAction", ["log_prob", "value"])


class CartPole:
    """Cart-pole balancing: 4 observations, 2 actions, reward 1 per step until the pole falls
    (|angle| > 12 degrees) or the cart leaves [-2.4, 2.4], at most ``max_steps`` steps."""

    def __init__(self, seed, max_steps=200):
        self.rng = np.random.default_rng(seed)
        self.max_steps = max_steps

    def reset(self):
        self.state = self.rng.uniform(-0.05, 0.05, 4)
        self.steps = 0
        return self.state.astype(np.float32)

    def step(self, action):
        x, x_dot, th, th_dot = self.state
        force = 10.0 if action == 1 else -10.0
        g, mc, mp, length, tau = 9.8, 1.0, 0.1, 0.5, 0.02
        total = mc + mp
        temp = (force + mp * length * th_dot ** 2 * math.sin(th)) / total
        th_acc = (g * math.sin(th) - math.cos(th) * temp) / (
            length * (4.0 / 3.0 - mp * math.cos(th) ** 2 / total))
        x_acc = temp - mp * length * th_acc * math.cos(th) / total
        x, x_dot = x + tau * x_dot, x_dot + tau * x_acc
        th, th_dot = th + tau * th_dot, th_dot + tau * th_acc
        self.state = np.array([x, x_dot, th, th_dot])
        self.steps += 1
        done = abs(x) > 2.4 or abs(th) > 12 * 2 * math.pi / 360 or self.steps >= self.max_steps
        return self.state.astype(np.float32), 1.0, done


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.affine1 = nn.Linear(4, 128)
        self.action_head = nn.Linear(128, 2)
        self.value_head = nn.Linear(128, 1)
        self.saved_actions, self.rewards = [], []

    def forward(self, x):
        x = F.relu(self.affine1(x))
        return F.softmax(self.action_head(x), dim=-1), self.value_head(x)


def main():
    parser = argparse.ArgumentParser(description="actor-critic")
    parser.add_argument("--gamma", type=float, default=0.99)
    parser.add_argument("--seed", type=int, default=543)
    parser.add_argument("--episodes", type=int, default=300)
    parser.add_argument("--max-steps", type=int, default=200)
    parser.add_argument("--log-interval", type=int, default=10)
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    env = CartPole(args.seed, args.max_steps)
    model = Policy()
    optimizer = optim.Adam(model.parameters(), lr=3e-2)
    eps = np.finfo(np.float32).eps.item()

    running_reward = 10.0
    first = None
    for i_episode in range(1, args.episodes + 1):
        state, ep_reward = env.reset(), 0.0
        for _ in range(args.max_steps):
            probs, value = model(torch.from_numpy(state).float())
            m = Categorical(probs)
            action = m.sample()
            model.saved_actions.append(SavedAction(m.log_prob(action), value))
            state, reward, done = env.step(action.item())
            model.rewards.append(reward)
            ep_reward += reward
            if done:
                break
        first = ep_reward if first is None else first
        running_reward = 0.05 * ep_reward + (1 - 0.05) * running_reward

        R, returns = 0.0, []
        for r in model.rewards[::-1]:
            R = r + args.gamma * R
            returns.insert(0, R)
        returns = torch.tensor(returns)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        policy_losses, value_losses = [], []
        for (log_prob, value), R in zip(model.saved_actions, returns):
            advantage = R - value.item()
            policy_losses.append(-log_prob * advantage)
            value_losses.append(F.smooth_l1_loss(value, torch.tensor([R])))
        optimizer.zero_grad()
        loss = torch.stack(policy_losses).sum() + torch.stack(value_losses).sum()
        loss.backward()
        optimizer.step()
        del model.rewards[:]
        del model.saved_actions[:]
        if i_episode % args.log_interval == 0:
            print(f"Episode {i_episode}\tLast reward: {ep_reward:.2f}\t"
                  f"Average reward: {running_reward:.2f}")
    print(f"RESULT running_reward={running_reward:.2f} last_reward={ep_reward:.1f} "
          f"first_reward={first:.1f}")


if __name__ == "__main__":
    main()
