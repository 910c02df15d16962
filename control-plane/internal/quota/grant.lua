-- The share a replica is given of one global limit (see Store.Grant): what it is due, capped
-- by what every other replica was given within the TTL. Shares are fractions of the limit,
-- kept as "<share>|<given at, Unix ms>".
-- KEYS[1]: the limit's hash. ARGV: replica, share due, now (ms), TTL (ms).
local now, ttl = tonumber(ARGV[3]), tonumber(ARGV[4])
local mine = 'grant/' .. ARGV[1]
local others = 0
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local field = fields[i]
  if field ~= mine and string.sub(field, 1, 6) == 'grant/' then
    local share, at = string.match(fields[i + 1], '^([^|]+)|(%d+)$')
    if share and now - tonumber(at) <= ttl then
      others = others + tonumber(share)
    end
  end
end
-- Rounded down to millionths, so that the shares written never sum above 1.
local given = math.floor(math.max(0, math.min(tonumber(ARGV[2]), 1 - others)) * 1e6) / 1e6
redis.call('HSET', KEYS[1], mine, string.format('%.6f|%d', given, now))
-- A number would come back as an integer reply, its fraction lost.
return string.format('%.6f', given)
