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

-- The indexed fields of a session, in the order scripts receive and read
-- them. exp and upd are microseconds; exp is '' when the session never
-- expires.
local session_fields = {'tenant', 'agent', 'state', 'parent', 'exp', 'upd'}

-- fields_from returns session_fields taken from list, starting at index i.
local function fields_from(list, i)
  local f = {}
  for j, name in ipairs(session_fields) do
    f[name] = list[i + j - 1]
  end
  return f
end

-- lex_index moves id from the lexicographic index key..old to key..new;
-- an empty or missing value has no index entry.
local function lex_index(key, id, old, new)
  if old == new then
    return
  end
  if old and old ~= '' then
    redis.call('ZREM', key .. old, id)
  end
  if new and new ~= '' then
    redis.call('ZADD', key .. new, 0, id)
  end
end

-- score_index gives id the score new in the index key, or removes it when
-- new is empty or missing.
local function score_index(key, id, old, new)
  if old == new then
    return
  end
  if new and new ~= '' then
    redis.call('ZADD', key, new, id)
  elseif old and old ~= '' then
    redis.call('ZREM', key, id)
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

-- index_session moves session id from the index entries of the fields o to
-- those of the fields n; {} stands for no entries.
local function index_session(P, id, o, n)
  lex_index(P .. 'idx:tenant:', id, o.tenant, n.tenant)
  lex_index(P .. 'idx:agent:', id, o.agent, n.agent)
  lex_index(P .. 'idx:state:', id, o.state, n.state)
  lex_index(P .. 'idx:parent:', id, o.parent, n.parent)
  score_index(P .. 'idx:expires', id, o.exp, n.exp)
  score_index(P .. 'idx:updated', id, o.upd, n.upd)
  score_index(P .. 'idx:closed', id, closed_at(o), closed_at(n))
end

-- A run's meta is "version TAB state TAB created TAB key": what scripts
-- need of a run without decoding its JSON. The key comes last, so it may
-- hold anything.
local function parse_run_meta(m)
  local v, st, c, k = string.match(m, '^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$')
  return {ver = v, state = st, created = c, key = k}
end

local function format_run_meta(r)
  return r.ver .. '\t' .. r.state .. '\t' .. r.created .. '\t' .. r.key
end

-- index_run moves run rid of session sid from the index entries of meta o
-- to those of meta n; nil stands for no entries.
local function index_run(P, sid, rid, runq, idem, o, n)
  local member = rid .. '\t' .. sid
  if o then
    redis.call('ZREM', P .. 'runs:' .. o.state, member)
    if o.state == 'queued' then
      redis.call('ZREM', runq, rid)
    end
    if o.key ~= '' then
      redis.call('ZREM', idem, o.key .. '\0' .. rid)
    end
  end
  if n then
    redis.call('ZADD', P .. 'runs:' .. n.state, n.created, member)
    if n.state == 'queued' then
      redis.call('ZADD', runq, n.created, rid)
    end
    if n.key ~= '' then
      redis.call('ZADD', idem, 0, n.key .. '\0' .. rid)
    end
  end
end

-- newest_with_key returns the id of the newest (largest id) run created
-- with key at or after since (microseconds), or nil. idem orders "key NUL
-- run id" bytewise, so the runs of one key come newest first; members of
-- other keys that share the range (a key that itself holds NUL) fail the
-- comparison with the run's own key.
local function newest_with_key(idem, runm, key, since)
  local members = redis.call('ZREVRANGEBYLEX', idem, '(' .. key .. '\1', '[' .. key .. '\0')
  for _, m in ipairs(members) do
    local rid = string.sub(m, #key + 2)
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

