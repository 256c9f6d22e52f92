-- lib.lua: helpers every script of the store starts with (scripts.go
-- prepends this file). Scripts check everything before their first write
-- and answer an error reply instead of writing anything: Redis runs a
-- script atomically but cannot roll one back, and it refuses a script for
-- lack of memory only at its first write, never half-way.

-- fail returns the error reply code, with detail after a space.
local function fail(code, detail)
  if detail then
    return redis.error_reply(code .. ' ' .. detail)
  end
  return redis.error_reply(code)
end

-- lease_token returns the token of the live lease at key, or nil. A lease
-- is the string "<token> <holder>".
local function lease_token(key)
  local v = redis.call('GET', key)
  if not v then
    return nil
  end
  return string.match(v, '^(%d+)')
end

-- unpack_strings returns the strings packed in buf, each after its length
-- in 4 bytes, big endian (see packString), or nil if buf is malformed.
local function unpack_strings(buf)
  local out, pos, size = {}, 1, #buf
  while pos + 3 <= size do
    local a, b, c, d = string.byte(buf, pos, pos + 3)
    local len = ((a * 256 + b) * 256 + c) * 256 + d
    out[#out + 1] = string.sub(buf, pos + 4, pos + 3 + len)
    pos = pos + 4 + len
  end
  if pos ~= size + 1 then
    return nil
  end
  return out
end

-- The indexed fields of a session, in the order scripts receive and read
-- them. ok is the session's order key, its member in every index (see
-- orderKey); exp and upd are microseconds, exp '' when the session never
-- expires; md holds the keys of its metadata indexes, packed.
local session_fields = {'tenant', 'agent', 'state', 'parent', 'fork', 'exp', 'upd', 'ok', 'md'}

-- fields_from returns session_fields taken from list, starting at index i.
local function fields_from(list, i)
  local f = {}
  for j, name in ipairs(session_fields) do
    f[name] = list[i + j - 1]
  end
  return f
end

-- lex_index moves a session from the lexicographic index key..old, where
-- its member was o_ok, to key..new as n_ok; an empty or missing value has
-- no index entry.
local function lex_index(key, old, o_ok, new, n_ok)
  if old == new and o_ok == n_ok then
    return
  end
  if old and old ~= '' then
    redis.call('ZREM', key .. old, o_ok)
  end
  if new and new ~= '' then
    redis.call('ZADD', key .. new, 0, n_ok)
  end
end

-- score_index moves a session in the index key from the score old, as
-- o_ok, to the score new, as n_ok; an empty or missing score has no entry.
local function score_index(key, old, o_ok, new, n_ok)
  if old == new and o_ok == n_ok then
    return
  end
  if old and old ~= '' then
    redis.call('ZREM', key, o_ok)
  end
  if new and new ~= '' then
    redis.call('ZADD', key, new, n_ok)
  end
end

-- closed_at is the score of a session in idx:closed: its UpdatedAt if it
-- is closed, else ''.
local function closed_at(f)
  if f.state == 'closed' then
    return f.upd
  end
  return ''
end

-- index_session moves a session from the index entries of the fields o to
-- those of the fields n; {} stands for no entries.
local function index_session(P, o, n)
  if o.ok ~= n.ok then
    if o.ok then
      redis.call('ZREM', P .. 'idx:all', o.ok)
    end
    if n.ok then
      redis.call('ZADD', P .. 'idx:all', 0, n.ok)
    end
  end
  lex_index(P .. 'idx:tenant:', o.tenant, o.ok, n.tenant, n.ok)
  lex_index(P .. 'idx:agent:', o.agent, o.ok, n.agent, n.ok)
  lex_index(P .. 'idx:state:', o.state, o.ok, n.state, n.ok)
  lex_index(P .. 'idx:parent:', o.parent, o.ok, n.parent, n.ok)
  lex_index(P .. 'idx:fork:', o.fork, o.ok, n.fork, n.ok)
  score_index(P .. 'idx:expires', o.exp, o.ok, n.exp, n.ok)
  score_index(P .. 'idx:updated', o.upd, o.ok, n.upd, n.ok)
  score_index(P .. 'idx:closed', closed_at(o), o.ok, closed_at(n), n.ok)
  if o.md ~= n.md or o.ok ~= n.ok then
    for _, key in ipairs(unpack_strings(o.md or '') or {}) do
      redis.call('ZREM', P .. key, o.ok)
    end
    for _, key in ipairs(unpack_strings(n.md or '') or {}) do
      redis.call('ZADD', P .. key, 0, n.ok)
    end
  end
end

-- A run's meta is "version TAB state TAB created TAB n TAB key": what
-- scripts need of a run without decoding its JSON. n is its place in the
-- order the session's runs were created (see run_n). The key comes last,
-- so it may hold anything.
local function parse_run_meta(m)
  local v, st, c, n, k = string.match(m, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
  return {ver = v, state = st, created = c, n = n, key = k}
end

local function format_run_meta(r)
  return r.ver .. '\t' .. r.state .. '\t' .. r.created .. '\t' .. r.n .. '\t' .. r.key
end

-- run_n formats a run's creation number so that numbers sort as strings.
local function run_n(n)
  return string.format('%015d', n)
end

-- by_state is a run's member in the session's runst index: state, then
-- creation number, then id, so that a state's runs are one range, in
-- creation order.
local function by_state(r, rid)
  return r.state .. '\0' .. r.n .. '\0' .. rid
end

-- by_key is a run's member in the session's idem index: the key, then
-- creation number, then id.
local function by_key(r, rid)
  return r.key .. '\0' .. r.n .. '\0' .. rid
end

-- index_run moves run rid of session sid from the index entries of meta o
-- to those of meta n; nil stands for no entries.
local function index_run(P, sid, rid, runst, idem, o, n)
  local member = rid .. '\t' .. sid
  if o then
    redis.call('ZREM', P .. 'runs:' .. o.state, member)
    redis.call('ZREM', runst, by_state(o, rid))
    if o.key ~= '' then
      redis.call('ZREM', idem, by_key(o, rid))
    end
  end
  if n then
    redis.call('ZADD', P .. 'runs:' .. n.state, n.created, member)
    redis.call('ZADD', runst, 0, by_state(n, rid))
    if n.key ~= '' then
      redis.call('ZADD', idem, 0, by_key(n, rid))
    end
  end
end

-- newest_with_key returns the id of the run created last with key at or
-- after since (microseconds), or nil. idem orders "key NUL n NUL id"
-- bytewise, so the runs of one key come newest first; members of other
-- keys that share the range (a key that itself holds NUL) fail the
-- comparison with the run's own key.
local function newest_with_key(idem, runm, key, since)
  local members = redis.call('ZREVRANGEBYLEX', idem, '(' .. key .. '\1', '[' .. key .. '\0')
  for _, m in ipairs(members) do
    local rid = string.sub(m, #key + 18)
    local meta = redis.call('HGET', runm, rid)
    if meta then
      local r = parse_run_meta(meta)
      if r.key == key and tonumber(r.created) >= tonumber(since) then
        return rid
      end
    end
  end
  return nil
end
