-- trace.sql - the trace database: what one or more partitioner runs did, in plain tables.
-- The only copy of the schema: tools/embed.py embeds it into the binary at build time, and
-- the version below is the one the code checks (PRAGMA user_version). Bump it on any change
-- that an older reader could misread.
--
-- Conventions: every row belongs to a run (run_id); ids are INTEGER PRIMARY KEYs, one past the
-- largest in the file when a run is written (a run's instr ids are consecutive: see run);
-- instructions are referenced by instr.id. Byte counts are exact (sub-byte types count
-- packed, so a value may be fractional) and stored as REAL. A trip count of NULL means
-- "unknown", never 1 by guess.
--
-- Lists that belong to one row are JSON in that row, written with the row in one insert and
-- built by SQLite's json_array/json_object: arrays (instr.operands, decision.alternatives) and
-- an object (decision.numbers); the views edge, decision_alt and decision_number give them one
-- row per element, for SQL.
--
-- Version 2 added instr.param_number, the called_computation table, collective.max_trip_count
-- and per-group sizes in collective_device. Version 3 made edge, decision_alt and
-- decision_number views over the JSON columns instr.operands, decision.alternatives and
-- decision.numbers, added run.first_instr, run.last_instr and collective_group.size, and
-- dropped the index instr_by_name. Version 4 made decision.numbers an object, {"key":value,...}
-- (it was a list of [key, value] pairs): json_each reads it with one row per number instead of
-- json_tree's three, which is most of what loading a 100k-instruction run costs in JSON.
-- Version 5 added warning.kind.
-- Version 5 added the while_loop table (every while of the output with its trip count and how
-- it was found), collective.loop and the loop view, and split device_traffic's bytes by trip-
-- count rule (send_bytes_known_trips, send_bytes_unknown_trips_once, ...).
-- Version 5 added the sharding_origin table (where propagation got each sharding).
-- Version 6 added the memory and memory_buffer tables and the memory_peak, computation_traffic
-- and op_name_traffic views.
PRAGMA user_version = 6;

-- One partitioner invocation. created_at and duration_ms come from the caller's clock.
CREATE TABLE run (
    id             INTEGER PRIMARY KEY,
    module         TEXT    NOT NULL,   -- HloModule name
    input_hash     TEXT    NOT NULL,   -- 16 hex digits over the input text
    num_partitions INTEGER NOT NULL,
    tool_version   TEXT    NOT NULL,
    created_at     TEXT    NOT NULL,   -- ISO 8601
    duration_ms    REAL,               -- NULL when not measured
    first_instr    INTEGER,            -- the run's instr rows are exactly the ids first_instr to
    last_instr     INTEGER             -- last_instr (one run is one transaction); NULL: none
);

-- Partitioner options of a run, one row per option (SpmdPartitionerOptions names).
CREATE TABLE run_option (
    run_id INTEGER NOT NULL REFERENCES run(id),
    key    TEXT    NOT NULL,
    value  TEXT    NOT NULL,
    PRIMARY KEY (run_id, key)
) WITHOUT ROWID;

-- Instructions of the input ('before') and of the partitioned output ('after').
CREATE TABLE instr (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL REFERENCES run(id),
    phase        TEXT    NOT NULL CHECK (phase IN ('before', 'after')),
    ir_id        INTEGER NOT NULL,     -- IrInstr.id: creation order within its module
    computation  TEXT    NOT NULL,
    is_root      INTEGER NOT NULL,     -- 1 for the root of its computation
    name         TEXT    NOT NULL,     -- unique within (run_id, phase)
    opcode       TEXT    NOT NULL,
    param_number INTEGER,              -- parameter(N): N; NULL for every other opcode
    shape        TEXT    NOT NULL,     -- HLO text without layout, e.g. f32[8,16]
    sharding     TEXT,                 -- HLO text incl. braces; NULL when none
    size_bytes   INTEGER NOT NULL,     -- ir_shape_byte_size (sub-byte types as whole bytes)
    op_name      TEXT,                 -- metadata={op_name=...}
    source_file  TEXT,
    source_line  INTEGER,
    derived_from INTEGER REFERENCES instr(id), -- 'after' rows: the 'before' instruction
    operands     TEXT                  -- JSON array of the operands' instr ids in operand order,
                                       -- e.g. [7,8] (null for an operand outside the module);
                                       -- NULL when none. The edge view lists them.
);
-- No index on name: one cost a 100k-instruction run 0.1 s (name) to 0.3 s ((run_id, phase,
-- name)) of CPU, a third of writing the whole trace. A run's rows are the id range
-- run.first_instr..last_instr, which SQLite reads by key; for a join on name it builds a
-- temporary index of its own.

-- Computations an instruction calls, both phases, in the order its attributes print. role:
-- 'body' and 'condition' (while), 'branch_K' (conditional: branch_computations={...} in order;
-- true_computation is branch_0, false_computation branch_1), 'to_apply', 'calls' (fusion,
-- call, custom-call called_computations), 'select' and 'scatter' (select-and-scatter).
-- A computation called from several places has one row per call site.
CREATE TABLE called_computation (
    run_id      INTEGER NOT NULL REFERENCES run(id),
    instr       INTEGER NOT NULL REFERENCES instr(id),  -- the caller
    idx         INTEGER NOT NULL,      -- 0-based position among the caller's callees
    role        TEXT    NOT NULL,
    computation TEXT    NOT NULL,      -- the callee, as in instr.computation
    PRIMARY KEY (instr, idx)
) WITHOUT ROWID;
CREATE INDEX called_computation_by_callee ON called_computation(run_id, computation);

-- Operand edges of both phases: operand `operand` (an instr id) is input number
-- `operand_index` of `user`. One row per element of instr.operands.
CREATE VIEW edge AS
SELECT i.run_id, i.phase, i.id AS user, CAST(o.key AS INTEGER) AS operand_index,
       o.value AS operand
FROM instr i, json_each(i.operands) o
WHERE o.type = 'integer';

-- A handler's choice for a source instruction, in the order the partitioner made them.
CREATE TABLE decision (
    id           INTEGER PRIMARY KEY,
    run_id       INTEGER NOT NULL REFERENCES run(id),
    seq          INTEGER NOT NULL,     -- 1-based order within the run
    instr        INTEGER REFERENCES instr(id),  -- the 'before' instruction
    handler      TEXT    NOT NULL,
    strategy     TEXT    NOT NULL,
    reason       TEXT,
    alternatives TEXT,                 -- JSON array of the strategies considered and not
                                       -- taken, e.g. ["batch","windowed_einsum"]; NULL: none
    numbers      TEXT                  -- JSON object of the values the decision compared, in
                                       -- the order compared, each a number or a string, e.g.
                                       -- {"lhs_bytes":4096,"output_sharding":"{replicated}"};
                                       -- NULL: none. A non-finite number is 9e999, -9e999 or null.
                                       -- A key compared twice is there twice (json_each and the
                                       -- view list both; other JSON readers may keep one).
);
CREATE INDEX decision_by_run ON decision(run_id);

-- Strategies considered and not taken, one row per element of decision.alternatives.
CREATE VIEW decision_alt AS
SELECT d.id AS decision_id, CAST(a.key AS INTEGER) AS idx, a.value AS strategy
FROM decision d, json_each(d.alternatives) a;

-- The numbers (or strings) the decision compared, e.g. ('lhs_bytes', 4096, NULL): one row per
-- member of decision.numbers; idx is its 0-based position (json_each's id grows in text order).
CREATE VIEW decision_number AS
SELECT d.id AS decision_id, row_number() OVER (PARTITION BY d.id ORDER BY n.id) - 1 AS idx,
       n.key AS key,
       CASE WHEN n.type IN ('integer', 'real') THEN CAST(n.atom AS REAL) END AS num,
       CASE WHEN n.type = 'text' THEN n.atom END AS str
FROM decision d, json_each(d.numbers) n;

-- One PartitionedHlo::Reshard call.
CREATE TABLE reshard (
    id            INTEGER PRIMARY KEY,
    run_id        INTEGER NOT NULL REFERENCES run(id),
    seq           INTEGER NOT NULL,    -- 1-based, as the partitioner numbered it
    requester     INTEGER REFERENCES instr(id),  -- 'before': whose handler asked
    value         INTEGER REFERENCES instr(id),  -- 'after': the local value resharded
    value_name    TEXT    NOT NULL,
    from_sharding TEXT    NOT NULL,
    to_sharding   TEXT    NOT NULL,
    method        TEXT    NOT NULL,    -- all-gather, all-to-all, collective-permute, cache-hit...
    result        INTEGER REFERENCES instr(id),  -- 'after': NULL when not in the output
    result_name   TEXT
);
CREATE INDEX reshard_by_run ON reshard(run_id, seq);

-- Every while instruction of the output module, with its trip count (body executions per
-- execution of the while) and how it was found. method: 'user' (--trip-count on the input
-- while it derives from; wins over the rest), 'backend_config' (known_trip_count), 'pattern'
-- (the induction-variable pattern of XLA's while-loop analysis: src/ir/loop.c), 'partitioner'
-- (a windowed-einsum loop shardlens emitted, as its windowed_loop row states, when the pattern
-- does not match it) or 'unknown'. Collectives of loops inside loops or in called computations
-- get the product of every enclosing count (collective.trip_count).
CREATE TABLE while_loop (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES run(id),
    instr           INTEGER NOT NULL REFERENCES instr(id),  -- 'after': the while
    source          INTEGER REFERENCES instr(id),  -- 'before': the input while it derives from
                                                   -- (a windowed loop: its dot)
    trip_count      INTEGER,           -- NULL = unknown
    method          TEXT    NOT NULL CHECK (method IN ('user', 'backend_config', 'pattern',
                                                       'partitioner', 'unknown')),
    reason          TEXT,              -- unknown: why (e.g. "the bound (tuple element 1) is a
                                       -- parameter: %n of main"); else how, e.g. "i = 0;
                                       -- i < 8; i += 1 (tuple element 0)"
    induction_index INTEGER,           -- tuple element of the induction variable; NULL: none
    executions      INTEGER,           -- runs of the while itself per run of the module (the
                                       -- enclosing loops' counts multiplied); NULL = unknown
    outer_loop      INTEGER REFERENCES while_loop(id)  -- the innermost loop around it; NULL: none
);
CREATE INDEX while_loop_by_run ON while_loop(run_id);

-- Every collective instruction of the output module, with what caused it.
-- bytes is S of the cost model: the full buffer (all-gather: the gathered output; reduce-scatter,
-- all-reduce, all-to-all, collective-permute: the operand).
CREATE TABLE collective (
    id          INTEGER PRIMARY KEY,
    run_id      INTEGER NOT NULL REFERENCES run(id),
    instr       INTEGER NOT NULL REFERENCES instr(id),  -- 'after'
    kind        TEXT    NOT NULL,      -- all-gather, reduce-scatter, all-reduce, all-to-all,
                                       -- collective-permute, collective-broadcast
    channel_id  INTEGER,               -- NULL when absent
    group_size  INTEGER NOT NULL,      -- devices in the largest group (permute: 2, a pair);
                                       -- costs use each group's own size
    n_groups    INTEGER NOT NULL,      -- groups (collective-permute: source-target pairs)
    shape       TEXT    NOT NULL,
    bytes       REAL    NOT NULL,      -- S, exact
    trip_count  INTEGER,               -- executions per run of the module; NULL = unknown
    max_trip_count INTEGER,            -- at most this many: trip_count when that is known; the
                                       -- only figure in a conditional branch whose count is
                                       -- unknown (see gspmd.md H.4); NULL = unbounded
    source      INTEGER REFERENCES instr(id),  -- 'before': the instruction it derives from
    cause       TEXT,                  -- as reported (reshard, dot, ...); "input" for a collective
                                       -- copied from the input; NULL when unreported
    reshard_id  INTEGER REFERENCES reshard(id),
    decision_id INTEGER REFERENCES decision(id),
    loop        INTEGER REFERENCES while_loop(id)  -- the innermost while whose body (or
                                       -- condition) runs it, through its first call site when
                                       -- its computation is called from several; NULL: none
);
CREATE INDEX collective_by_run ON collective(run_id);

-- Device groups: one row per (collective, group, position). collective-permute: one group per
-- source-target pair, position 0 the source and position 1 the target.
CREATE TABLE collective_group (
    collective_id INTEGER NOT NULL REFERENCES collective(id),
    group_idx     INTEGER NOT NULL,
    position      INTEGER NOT NULL,
    size          INTEGER NOT NULL,    -- devices in this group (its number of positions)
    device        INTEGER NOT NULL,
    PRIMARY KEY (collective_id, group_idx, position)
) WITHOUT ROWID;

-- A windowed-einsum loop: the source dot and the while that replaced its collective.
CREATE TABLE windowed_loop (
    id                  INTEGER PRIMARY KEY,
    run_id              INTEGER NOT NULL REFERENCES run(id),
    dot                 INTEGER REFERENCES instr(id),  -- 'before'
    loop                INTEGER REFERENCES instr(id),  -- 'after'; NULL when not in the output
    loop_name           TEXT    NOT NULL,
    variant             TEXT    NOT NULL,  -- all-gather, reduce-scatter, bidirectional, ...
    iterations          INTEGER NOT NULL,
    bytes_per_iteration INTEGER NOT NULL   -- bytes each device permutes per iteration
);
CREATE INDEX windowed_loop_by_run ON windowed_loop(run_id);

-- Partitioner warnings: what in the input is not what it seems, and the fallbacks taken.
CREATE TABLE warning (
    id      INTEGER PRIMARY KEY,
    run_id  INTEGER NOT NULL REFERENCES run(id),
    instr   INTEGER REFERENCES instr(id),  -- 'before'; NULL when not about one instruction
    kind    TEXT    NOT NULL,  -- 'unannotated' (instructions without a sharding),
                               -- 'already-partitioned' (collectives, partition-id outside
                               -- manual regions, already-local shapes), 'custom-call-fallback',
                               -- 'full-remat' (involuntary full rematerialization),
                               -- 'no-handler' (an opcode without a handler), 'other',
                               -- 'ignored-alias' (input_output_alias pairs the memory
                               -- estimate ignores; instr NULL)
    message TEXT    NOT NULL
);

CREATE INDEX warning_by_run ON warning(run_id);

-- Where sharding propagation got each sharding it set on a 'before' instruction (XLA's
-- ShardingPropagation, run before partitioning): the annotated source it came from (a user
-- annotation, a parameter's or the output's sharding), the path of instructions it passed
-- through (JSON array of instr ids, source first, instr last), the direction ('forward',
-- 'backward', 'shard group', 'computation', 'fix-up'), the aggressiveness level (NULL outside
-- the fixed point), the rule, and when two candidates were merged both of them (candidate:
-- what the last hop proposed; replaced: what the instruction had). One row per instruction.
CREATE TABLE sharding_origin (
    id        INTEGER PRIMARY KEY,
    run_id    INTEGER NOT NULL REFERENCES run(id),
    instr     INTEGER NOT NULL REFERENCES instr(id),
    sharding  TEXT    NOT NULL,
    source    INTEGER REFERENCES instr(id),
    path      TEXT,
    direction TEXT    NOT NULL,
    level     INTEGER,
    rule      TEXT,
    candidate TEXT,
    replaced  TEXT
);
CREATE INDEX sharding_origin_by_run ON sharding_origin(run_id);

-- Ring model (nccl-tests conventions), per device and per execution, g = the size of the
-- device's own group (groups may differ in size, e.g. {{0,1,2},{3}}):
-- all-gather, reduce-scatter, all-to-all, collective-broadcast (g-1)/g*S each way;
-- all-reduce 2(g-1)/g*S; collective-permute S sent by the source, S received by the target
-- (nothing for a pair from a device to itself).
CREATE VIEW collective_device AS
SELECT c.run_id, c.id AS collective_id, c.kind, g.device, c.trip_count,
       CASE WHEN c.kind = 'collective-permute'
            THEN (CASE WHEN g.position = 0 AND g.device <> o.device THEN c.bytes ELSE 0 END)
            WHEN c.kind = 'all-reduce' THEN 2.0 * (g.size - 1) * c.bytes / g.size
            ELSE 1.0 * (g.size - 1) * c.bytes / g.size END AS send_bytes,
       CASE WHEN c.kind = 'collective-permute'
            THEN (CASE WHEN g.position = 1 AND g.device <> o.device THEN c.bytes ELSE 0 END)
            WHEN c.kind = 'all-reduce' THEN 2.0 * (g.size - 1) * c.bytes / g.size
            ELSE 1.0 * (g.size - 1) * c.bytes / g.size END AS recv_bytes
FROM collective c
JOIN collective_group g ON g.collective_id = c.id
JOIN collective_group o ON o.collective_id = c.id AND o.group_idx = g.group_idx
                       AND o.position = (CASE WHEN c.kind = 'collective-permute'
                                              THEN 1 - g.position ELSE g.position END);

-- Per device over a run, kept apart by trip-count rule: *_known_trips are collectives whose
-- trip count is known, times that count; *_unknown_trips_once are the others, each counted
-- once (one execution), which is a lower bound and no total: never add the two.
CREATE VIEW device_traffic AS
SELECT run_id, device,
       SUM(CASE WHEN trip_count IS NOT NULL THEN send_bytes * trip_count ELSE 0 END)
           AS send_bytes_known_trips,
       SUM(CASE WHEN trip_count IS NOT NULL THEN recv_bytes * trip_count ELSE 0 END)
           AS recv_bytes_known_trips,
       SUM(CASE WHEN trip_count IS NULL THEN send_bytes ELSE 0 END)
           AS send_bytes_unknown_trips_once,
       SUM(CASE WHEN trip_count IS NULL THEN recv_bytes ELSE 0 END)
           AS recv_bytes_unknown_trips_once,
       COUNT(DISTINCT collective_id) AS collectives,
       COUNT(DISTINCT CASE WHEN trip_count IS NULL THEN collective_id END)
           AS unknown_trip_collectives
FROM collective_device
GROUP BY run_id, device;

-- Per collective, trip count applied: S, bytes sent summed over all devices, and the bytes
-- the busiest device sends.
CREATE VIEW collective_traffic AS
SELECT c.run_id, c.id AS collective_id, c.instr, c.kind, c.source, c.trip_count,
       c.bytes * COALESCE(c.trip_count, 1) AS full_bytes,
       COALESCE((SELECT SUM(d.send_bytes) FROM collective_device d
                 WHERE d.collective_id = c.id), 0) * COALESCE(c.trip_count, 1) AS send_bytes,
       COALESCE((SELECT MAX(d.send_bytes) FROM collective_device d
                 WHERE d.collective_id = c.id), 0) * COALESCE(c.trip_count, 1)
           AS max_device_send_bytes
FROM collective c;

-- Per source instruction and collective kind: what it caused.
CREATE VIEW source_traffic AS
SELECT t.run_id, t.source AS source_instr, s.name AS source, s.opcode, s.op_name, t.kind,
       COUNT(*) AS collectives, SUM(t.full_bytes) AS full_bytes, SUM(t.send_bytes) AS send_bytes,
       SUM(t.trip_count IS NULL) AS unknown_trip_collectives
FROM collective_traffic t
LEFT JOIN instr s ON s.id = t.source
GROUP BY t.run_id, t.source, t.kind;

-- Per while loop: its trip count, how it was found, and the collectives it runs directly (not
-- those of loops nested in it: they have their own row). bytes_per_execution is S summed over
-- them, one execution each; send_bytes_per_execution the bytes sent summed over devices, one
-- execution each; send_bytes the same with each collective's trip count applied (enclosing
-- loops included), NULL when any of them has an unknown count.
CREATE VIEW loop AS
SELECT w.run_id, w.id AS loop_id, i.name AS loop, i.computation, s.name AS source,
       w.trip_count, w.method, w.reason, w.executions, w.outer_loop,
       COUNT(c.id) AS collectives,
       COALESCE(SUM(c.bytes), 0) AS bytes_per_execution,
       COALESCE(SUM(d.send_bytes), 0) AS send_bytes_per_execution,
       CASE WHEN COUNT(c.id) = COUNT(c.trip_count)
            THEN COALESCE(SUM(d.send_bytes * c.trip_count), 0) END AS send_bytes
FROM while_loop w
JOIN instr i ON i.id = w.instr
LEFT JOIN instr s ON s.id = w.source
LEFT JOIN collective c ON c.loop = w.id
LEFT JOIN (SELECT collective_id, SUM(send_bytes) AS send_bytes FROM collective_device
           GROUP BY collective_id) d ON d.collective_id = c.id
GROUP BY w.id;

-- The memory estimate (src/memory/memory.h states the model): one row for the input module on
-- one device (phase 'before', devices NULL) and one per group of devices with the same figures
-- for the partitioned module (phase 'after'; an SPMD program gives every device the same local
-- shapes, so there is one group, every device). Bytes are whole bytes per device.
CREATE TABLE memory (
    id              INTEGER PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES run(id),
    phase           TEXT    NOT NULL CHECK (phase IN ('before', 'after')),
    devices         TEXT,              -- JSON array of the device ids the row holds for
    parameter_bytes INTEGER NOT NULL,  -- entry parameters (local shapes)
    output_bytes    INTEGER NOT NULL,  -- values the entry returns
    alias_bytes     INTEGER NOT NULL,  -- of those, in donated parameters' storage
    peak_bytes      INTEGER NOT NULL,  -- most bytes live at once: parameters, outputs, temps
    peak_temp_bytes INTEGER NOT NULL,  -- of peak_bytes, temporaries (nested peaks included)
    max_temp_bytes  INTEGER NOT NULL,  -- most temporary bytes live at once, anywhere
    peak_instr      INTEGER REFERENCES instr(id), -- where the peak is first reached (entry)
    peak_position   INTEGER NOT NULL,  -- its 0-based place in the entry's schedule
    n_values        INTEGER NOT NULL,  -- values with storage in the entry
    profile         TEXT,              -- JSON array: live bytes over the entry's schedule, for a
                                       -- chart; element k is the most live at once in positions
                                       -- [k * profile_step, (k + 1) * profile_step): the peak is
                                       -- in it (at most 512 elements)
    profile_step    INTEGER NOT NULL
);
CREATE INDEX memory_by_run ON memory(run_id);

-- The largest buffers live at a memory row's peak (at most 10), largest first.
CREATE TABLE memory_buffer (
    memory_id INTEGER NOT NULL REFERENCES memory(id),
    rank      INTEGER NOT NULL,  -- 1 = largest
    instr     INTEGER NOT NULL REFERENCES instr(id), -- defines it (same phase as the row)
    leaf      INTEGER NOT NULL,  -- array leaf of instr's shape, pre-order
    bytes     INTEGER NOT NULL,
    kind      TEXT    NOT NULL,  -- 'parameter', 'output', 'temp', or 'nested' (the own peak
                                 -- of the computations instr, a while or call, runs)
    PRIMARY KEY (memory_id, rank)
);

-- The peak's buffers with their instruction, its source op ('after': the input instruction
-- it derives from) and op_name.
CREATE VIEW memory_peak AS
SELECT m.run_id, m.phase, m.devices, m.peak_bytes, p.name AS peak_instr, b.rank, b.kind,
       b.bytes, i.name AS buffer, i.opcode, COALESCE(s.name, i.name) AS source,
       COALESCE(s.op_name, i.op_name) AS op_name
FROM memory m
LEFT JOIN instr p ON p.id = m.peak_instr
JOIN memory_buffer b ON b.memory_id = m.id
JOIN instr i ON i.id = b.instr
LEFT JOIN instr s ON s.id = i.derived_from;

-- Per computation holding collectives: their traffic, trip counts applied (collectives of
-- unknown trip count counted once, and counted in unknown_trip_collectives).
CREATE VIEW computation_traffic AS
SELECT t.run_id, i.computation, COUNT(*) AS collectives, SUM(t.send_bytes) AS send_bytes,
       SUM(t.trip_count IS NULL) AS unknown_trip_collectives
FROM collective_traffic t
JOIN instr i ON i.id = t.instr
GROUP BY t.run_id, i.computation;

-- Per op_name of the source instructions (roll up by prefix with substr/instr, README): the
-- traffic they caused, trip counts applied as in collective_traffic.
CREATE VIEW op_name_traffic AS
SELECT t.run_id, COALESCE(s.op_name, '') AS op_name, COUNT(*) AS collectives,
       SUM(t.send_bytes) AS send_bytes, SUM(t.trip_count IS NULL) AS unknown_trip_collectives
FROM collective_traffic t
LEFT JOIN instr s ON s.id = t.source
GROUP BY t.run_id, COALESCE(s.op_name, '');
