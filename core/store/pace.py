"""The pace: how fast the queue drains, which the admission script's wait bound estimates
a newcomer's wait from (`pace` in core/keys.py). The finish script writes it
(`BUSY_LUA`, `DRAIN_LUA`); the advance script measures it where an episode leaves the
queue (`WAITED_LUA`) and notes when the queue ran dry."""

from __future__ import annotations

# the weight of the newest episode in the pace (`BUSY_LUA`): a memory of ~10 episodes
PACE_WEIGHT = 0.2
# … and of the newest gap between two ends, once there were 20: a memory of ~40 ends (one
# gap is noisy: with many workers, ends come at random moments)
GAP_WEIGHT = 0.05

CONSTANTS_LUA = f"local PACE_WEIGHT = {PACE_WEIGHT}\nlocal GAP_WEIGHT = {GAP_WEIGHT}\n"

# The finish script's pace job: a worker's time on a one-shot episode, total - queued.
BUSY_LUA = """
if ARG.total_s ~= '' and ARG.queued_s ~= ''
   and redis.call('HGET', KEY.episode, 'mode') ~= INTERACTIVE then
  local busy = math.max(tonumber(ARG.total_s) - tonumber(ARG.queued_s), 0)
  local mean = tonumber(redis.call('HGET', KEY.pace, 'busy'))
  mean = mean and mean + (busy - mean) * PACE_WEIGHT or busy
  redis.call('HSET', KEY.pace, 'busy', tostring(mean))
end
"""

# The finish script's drain job: the gap between this end and the last, when episodes
# waited throughout (at both ends, and the queue never ran dry in between: the advance
# script), so no worker idled in between; Redis's clock, one for every host.
DRAIN_LUA = """
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
local waiting = redis.call('ZCARD', KEY.queued) > 0 and 1 or 0
local last = redis.call('HMGET', KEY.pace, 'last', 'waiting', 'gap', 'gaps')
if waiting == 1 and last[2] == '1' then
  local gap = math.max(now - tonumber(last[1]), 0)
  -- the mean of the gaps so far, then (from 1 / GAP_WEIGHT of them) a moving average: the
  -- first few gaps, often of a slow start, do not outweigh the next ones for long
  local n = math.min((tonumber(last[4]) or 0) + 1, 1 / GAP_WEIGHT)
  local mean = tonumber(last[3])
  mean = mean and mean + (gap - mean) / n or gap
  redis.call('HSET', KEY.pace, 'gap', tostring(mean), 'gaps', n)
end
redis.call('HSET', KEY.pace, 'last', tostring(now), 'waiting', waiting)
"""

# The advance script's pace job, as an episode leaves the queue: its wait per episode that
# was ahead of it when it was admitted (`admission.CREATE` notes both, on Redis's clock),
# which is what the bound estimates a newcomer's wait by. The drain gaps alone are measured
# only while the queue stays full; an estimate too slow (a deployment's cold start: 0.26 s
# a gap against ~0.012 s warm, pooled) then refused all but a queue of one or two, which ran
# dry between ends and so never corrected it: a C=16 load was refused 9 requests in 10.
# Any admitted episode with one ahead measures it.
WAITED_LUA = """
local seen = redis.call('HMGET', KEY.episode, 'ahead', 'admitted')
local ahead, admitted = tonumber(seen[1]), tonumber(seen[2])
if ahead and admitted and ahead > 0 then
  local clock = redis.call('TIME')
  local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
  local per = math.max(now - admitted, 0) / ahead
  local last = redis.call('HMGET', KEY.pace, 'gap', 'gaps')
  local n = math.min((tonumber(last[2]) or 0) + 1, 1 / GAP_WEIGHT)
  local mean = tonumber(last[1])
  mean = mean and mean + (per - mean) / n or per
  redis.call('HSET', KEY.pace, 'gap', tostring(mean), 'gaps', n)
end
"""
