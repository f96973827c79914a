/* report.js - the shardlens HTML report: reads the page's JSON (#data, written by
 * reports/html.c) and draws totals, bar charts, the mesh, the collectives table with its
 * explanations, the op_name tree, the warnings, the diff and the graphs (Graphviz SVG with
 * pan, zoom and search). Plain DOM code, no library, nothing fetched. */
(function () {
  'use strict';
  var T_START = performance.now();
  var D = JSON.parse(document.getElementById('data').textContent);
  var R = D.report;
  /* run-length coded arrays ([value, count, ...]) back to one value per element */
  function unrle(a) {
    var n = 0, j, k = 0;
    for (j = 1; j < a.length; j += 2) n += a[j];
    var out = new Int32Array(n);
    for (j = 0; j < a.length; j += 2) for (var c = 0; c < a[j + 1]; c++) out[k++] = a[j];
    return out;
  }
  D.comp = unrle(D.comp || []);
  var TREES = D.trees || {};
  Object.keys(TREES).forEach(function (ph) {
    var T = TREES[ph];
    T.leafOf = unrle(T.leaf);
    T.units = []; T.why = [];
    for (var k = 0; k < T.units_why.length; k += 2) { T.units.push(T.units_why[k]); T.why.push(T.units_why[k + 1]); }
    T.kids = T.parent.map(function () { return []; });
    T.parent.forEach(function (p, g) { if (p >= 0) T.kids[p].push(g); });
  });
  var ORIGIN = {};
  (D.origins || []).forEach(function (o) { ORIGIN[o[0]] = o; });
  var $ = function (id) { return document.getElementById(id); };
  var KIND_COLORS = {
    'all-gather': '#e8743b', 'reduce-scatter': '#9b59b6', 'all-reduce': '#d9534f',
    'all-to-all': '#2e86c1', 'collective-permute': '#17a589', 'collective-broadcast': '#b7950b'
  };

  function el(tag, attrs, text) {
    var e = document.createElement(tag);
    if (attrs) for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function bytes(v) {
    if (v === null || v === undefined) return '-';
    var u = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'], i = 0;
    while (Math.abs(v) >= 1024 && i + 1 < u.length) { v /= 1024; i++; }
    return (i === 0 ? String(Math.round(v)) : v.toPrecision(3)) + ' ' + u[i];
  }
  function micros(us) {
    if (us >= 1e6) return (us / 1e6).toPrecision(3) + ' s';
    if (us >= 1e3) return (us / 1e3).toPrecision(3) + ' ms';
    return us.toPrecision(3) + ' us';
  }
  function kindColor(k) {
    for (var p in KIND_COLORS) if (k && k.indexOf(p) === 0) return KIND_COLORS[p];
    return '#7f8c8d';
  }

  /* ---- totals ---- */
  function card(parent, value, key) {
    var c = el('div', { 'class': 'card' });
    c.appendChild(el('div', { 'class': 'v' }, value));
    c.appendChild(el('div', { 'class': 'k' }, key));
    parent.appendChild(c);
  }
  function drawTotals() {
    $('title').textContent = 'shardlens: ' + R.module;
    $('subtitle').textContent = R.num_partitions + ' devices; ring model at ' +
      R.model.link_gbps + ' Gbit/s, ' + R.model.latency_us + ' us per step' +
      (D.old ? '; compared with ' + (D.old_label || 'the old run') : '');
    var t = R.total, box = $('totals');
    card(box, t.collectives, 'collectives');
    card(box, bytes(t.send), 'bytes sent, all devices');
    var busy = null;
    R.devices.forEach(function (d) { if (d.device === R.busiest) busy = d; });
    card(box, busy ? 'device ' + busy.device : '-',
         busy ? 'busiest: sends ' + bytes(busy.send) + ', receives ' + bytes(busy.recv) : 'busiest device');
    card(box, micros(t.time_us), 'estimated communication time');
    var f = R.fallback;
    if (f && f.sources) card(box, bytes(f.send), 'of it at ' + f.sources + ' custom call' + (f.sources === 1 ? '' : 's') +
                             ' partitioned by fallback (an upper bound: XLA runs their own rule)');
    if (t.unknown) card(box, t.unknown, 'collectives with unknown trip count (' + bytes(t.unknown_send) + ' per run, apart)');
  }

  /* ---- bars ---- */
  function bars(box, rows, busiestKey) {
    var max = 0;
    rows.forEach(function (r) { max = Math.max(max, r.v); });
    if (!rows.length) box.appendChild(el('div', { 'class': 'note' }, 'no traffic'));
    rows.forEach(function (r) {
      var b = el('div', { 'class': 'bar', title: r.label + ': ' + bytes(r.v) });
      b.appendChild(el('span', { 'class': 'l' }, r.label));
      var t = el('span', { 'class': 't' }), f = el('div', { 'class': 'f' + (r.key === busiestKey ? ' busiest' : '') });
      f.style.width = (max ? 100 * r.v / max : 0) + '%';
      if (r.color) f.style.background = r.color;
      t.appendChild(f); b.appendChild(t);
      b.appendChild(el('span', { 'class': 'n' }, bytes(r.v)));
      box.appendChild(b);
    });
  }
  function drawBars() {
    bars($('bars-device'), R.devices.map(function (d) {
      return { label: 'device ' + d.device, v: d.send, key: d.device };
    }), R.busiest);
    bars($('bars-kind'), R.kinds.map(function (k) {
      return { label: k.key, v: k.send, color: kindColor(k.key) };
    }));
  }

  /* ---- mesh ---- */
  var meshCells = [];
  function drawMesh() {
    if (!R.mesh.length) return;
    $('mesh-panel').hidden = false;
    var axes = R.mesh, cols = axes[axes.length - 1].size, rows = R.num_partitions / cols;
    var max = 0, byDev = {};
    R.devices.forEach(function (d) { byDev[d.device] = d; max = Math.max(max, d.send); });
    var tbl = el('table');
    for (var r = 0; r < rows; r++) {
      var tr = el('tr');
      for (var c = 0; c < cols; c++) {
        var dev = r * cols + c, d = byDev[dev], v = d ? d.send : 0, a = max ? v / max : 0;
        var td = el('td', { title: 'device ' + dev + ': sends ' + bytes(v) }, dev);
        td.style.background = 'rgba(217, 83, 79, ' + (0.08 + 0.85 * a).toFixed(3) + ')';
        meshCells[dev] = td; tr.appendChild(td);
      }
      tbl.appendChild(tr);
    }
    $('mesh').appendChild(tbl);
    $('mesh-note').textContent = 'axes ' + axes.map(function (x) { return x.name + '=' + x.size; }).join(', ') +
      ' (rows: ' + (axes.length > 1 ? axes.slice(0, -1).map(function (x) { return x.name; }).join(' x ') : '-') +
      ', columns: ' + axes[axes.length - 1].name + '); colour: bytes sent. Hover a collective to see its groups.';
  }
  function showGroups(c) {
    meshCells.forEach(function (td) { if (td) { td.classList.remove('in-group'); td.textContent = td.textContent.split(':')[0]; } });
    if (!c || !meshCells.length) return;
    c.groups.forEach(function (g, gi) {
      g.forEach(function (dev) {
        var td = meshCells[dev];
        if (!td) return;
        if (gi === 0) td.classList.add('in-group');
        td.textContent = dev + ':' + 'g' + gi;
      });
    });
    $('mesh-note').textContent = c.name + ': ' + c.n_groups + ' group(s) of ' + c.group_size +
      (c.groups.length < c.n_groups ? ' (first ' + c.groups.length + ' shown)' : '') + '; group 0 outlined';
  }

  /* ---- collectives table ---- */
  var rows = [], sortKey = 'send', sortDir = -1;
  function groupsText(c) {
    var g0 = c.groups[0] || [];
    var s = c.n_groups + 'x' + c.group_size;
    if (g0.length) s += ' {' + g0.slice(0, 8).join(',') + (g0.length > 8 ? ',...' : '') + '}' + (c.n_groups > 1 ? ',...' : '');
    return s;
  }
  function tripsText(c) {
    if (c.trips >= 0) return String(c.trips);
    return c.max_trips > 0 ? '<=' + c.max_trips : 'unknown';
  }
  function drawTable() {
    var tb = document.querySelector('#collectives tbody');
    (D.collectives || []).forEach(function (c, i) {
      var tr = el('tr', { 'data-index': i });
      tr.appendChild(el('td', null, c.name));
      var k = el('td'), s = el('span', { 'class': 'kind' }, c.kind);
      s.style.background = kindColor(c.kind); k.appendChild(s); tr.appendChild(k);
      tr.appendChild(el('td', null, groupsText(c)));
      tr.appendChild(el('td', { 'class': 'num' }, bytes(c.bytes)));
      tr.appendChild(el('td', { 'class': 'num' }, tripsText(c)));
      tr.appendChild(el('td', { 'class': 'num' }, c.trips >= 0 ? bytes(c.send) : bytes(c.send) + ' per run'));
      tr.appendChild(el('td', { title: c.op_name || '' }, c.source || '-'));
      tr.addEventListener('click', function () { selectCollective(i, tr); });
      tr.addEventListener('mouseenter', function () { showGroups(c); });
      rows.push({ tr: tr, c: c, text: [c.name, c.kind, c.source, c.op_name, c.shape].join(' ').toLowerCase() });
    });
    $('coll-count').textContent = '(' + rows.length + ')';
    sortRows();
    $('filter').addEventListener('input', filterRows);
    $('more-rows').addEventListener('click', function () { showAllRows = true; filterRows(); });
    document.querySelectorAll('#collectives th').forEach(function (th) {
      th.addEventListener('click', function () {
        var k = th.getAttribute('data-key');
        if (k === sortKey) sortDir = -sortDir; else { sortKey = k; sortDir = k === 'name' || k === 'kind' || k === 'source' ? 1 : -1; }
        sortRows();
      });
    });
  }
  function sortValue(c, k) {
    if (k === 'groups') return c.n_groups * 1e6 + c.group_size;
    var v = c[k];
    return v === null || v === undefined ? '' : v;
  }
  function sortRows() {
    rows.sort(function (a, b) {
      var x = sortValue(a.c, sortKey), y = sortValue(b.c, sortKey);
      if (x < y) return -sortDir;
      if (x > y) return sortDir;
      return a.c.instr - b.c.instr;
    });
    var tb = document.querySelector('#collectives tbody');
    rows.forEach(function (r) { tb.appendChild(r.tr); });
    filterRows();
    document.querySelectorAll('#collectives th').forEach(function (th) {
      th.classList.remove('sorted-asc', 'sorted-desc');
      if (th.getAttribute('data-key') === sortKey) th.classList.add(sortDir > 0 ? 'sorted-asc' : 'sorted-desc');
    });
  }
  /* Rows past ROW_LIMIT (in the current order, among those the filter keeps) are in the table
   * but not displayed until asked for: laying out tens of thousands of rows took seconds. */
  var ROW_LIMIT = 200, showAllRows = false;
  function filterRows() {
    var q = $('filter').value.trim().toLowerCase(), shown = 0, match = 0;
    rows.forEach(function (r) {
      var ok = !q || r.text.indexOf(q) >= 0;
      match += ok;
      ok = ok && (showAllRows || match <= ROW_LIMIT);
      r.tr.style.display = ok ? '' : 'none';
      shown += ok;
    });
    $('coll-count').textContent = '(' + match + (match < rows.length ? ' of ' + rows.length : '') + ')';
    var more = $('more-rows');
    more.hidden = shown >= match;
    more.textContent = 'showing the first ' + shown + ' of ' + match + ' rows: filter to narrow them, or click to show all';
  }
  function selectCollective(i, tr) {
    var c = D.collectives[i];
    document.querySelectorAll('#collectives tr.selected').forEach(function (x) { x.classList.remove('selected'); });
    tr.classList.add('selected');
    var text = c.explain >= 0 ? D.explain[c.explain].map(function (k) { return D.lines[k]; }).join('\n')
                              : 'No source instruction was recorded for ' + c.name + '.';
    $('explain').textContent = c.kind + ' %' + c.name + ' ' + c.shape + (c.cause ? ' (' + c.cause + ')' : '') + '\n\n' + text;
    showGroups(c);
    if (!selectInstr(c.instr, 'after') && c.source_instr >= 0) selectInstr(c.source_instr, 'before');
    if (c.source_instr >= 0) selectOp(c.source_instr);
  }

  /* ---- op_name tree ---- */
  function drawTree() {
    var root = { name: '', bytes: 0, kids: {}, n: 0 };
    (D.collectives || []).forEach(function (c) {
      var parts = (c.op_name || '(no op_name)').split('/'), node = root;
      root.bytes += c.send; root.n++;
      parts.forEach(function (p) {
        if (!node.kids[p]) node.kids[p] = { name: p, bytes: 0, kids: {}, n: 0 };
        node = node.kids[p]; node.bytes += c.send; node.n++;
      });
    });
    function render(node, depth) {
      var kids = Object.keys(node.kids).map(function (k) { return node.kids[k]; });
      kids.sort(function (a, b) { return b.bytes - a.bytes || (a.name < b.name ? -1 : 1); });
      var frag = document.createDocumentFragment();
      kids.forEach(function (k) {
        var d = el('details'), s = el('summary');
        s.appendChild(document.createTextNode(k.name));
        s.appendChild(el('span', { 'class': 'b' }, bytes(k.bytes) + ' (' + k.n + ')'));
        d.appendChild(s);
        if (Object.keys(k.kids).length) { /* what is inside is made when first opened */
          var made = false, grow = function () { if (!made && d.open) { made = true; d.appendChild(render(k, depth + 1)); } };
          d.addEventListener('toggle', grow);
          if (depth < 2 && kids.length <= 40) { d.open = true; grow(); } /* a short top opens */
        }
        frag.appendChild(d);
      });
      return frag;
    }
    if (!root.n) $('tree').appendChild(el('div', { 'class': 'note' }, 'no collectives'));
    else $('tree').appendChild(render(root, 0));
  }

  function drawWarnings() {
    var w = D.warnings || [];
    $('warn-count').textContent = '(' + w.length + ')';
    if (!w.length) $('warnings').appendChild(el('li', { 'class': 'note' }, 'none'));
    w.forEach(function (x) { $('warnings').appendChild(el('li', null, (x.instr ? '%' + x.instr + ': ' : '') + x.message)); });
  }

  /* ---- diff ---- */
  function diffRows(oldRows, newRows) {
    var m = {}, out = [];
    oldRows.forEach(function (r) { m[r.key + '\u0000' + (r.op_name || '')] = r; });
    newRows.forEach(function (r) {
      var k = r.key + '\u0000' + (r.op_name || ''), o = m[k];
      delete m[k];
      out.push({ key: r.key, old: o ? o.send : null, now: r.send });
    });
    Object.keys(m).forEach(function (k) { out.push({ key: m[k].key, old: m[k].send, now: null }); });
    return out;
  }
  function drawDiff() {
    if (!D.old) return;
    $('diff').hidden = false;
    var box = $('diff-body');
    function table(title, list) {
      box.appendChild(el('h3', null, title));
      var t = el('table', { 'class': 'diff' }), h = el('tr');
      ['', 'old', 'new', 'change'].forEach(function (x) { h.appendChild(el('th', null, x)); });
      t.appendChild(h);
      list.sort(function (a, b) { return Math.abs((b.now || 0) - (b.old || 0)) - Math.abs((a.now || 0) - (a.old || 0)); });
      list.forEach(function (r) {
        var tr = el('tr'), st, cls;
        if (r.old === null) { st = 'new'; cls = 'diff-new'; }
        else if (r.now === null) { st = 'gone'; cls = 'diff-gone'; }
        else if (r.now > r.old) { st = 'grew +' + bytes(r.now - r.old) + (r.old ? ' (+' + (100 * (r.now - r.old) / r.old).toFixed(1) + '%)' : ''); cls = 'diff-grew'; }
        else if (r.now < r.old) { st = 'shrank -' + bytes(r.old - r.now) + ' (' + (100 * (r.now - r.old) / r.old).toFixed(1) + '%)'; cls = 'diff-shrank'; }
        else { st = 'same'; cls = ''; }
        tr.appendChild(el('td', null, r.key));
        tr.appendChild(el('td', { 'class': 'num' }, r.old === null ? '-' : bytes(r.old)));
        tr.appendChild(el('td', { 'class': 'num' }, r.now === null ? '-' : bytes(r.now)));
        tr.appendChild(el('td', { 'class': cls }, st));
        tr.className = 'diff-row ' + cls;
        t.appendChild(tr);
      });
      box.appendChild(t);
    }
    table('Total bytes sent', [{ key: 'all devices', old: D.old.total.send, now: R.total.send }]);
    table('Per kind', diffRows(D.old.kinds, R.kinds));
    table('Per source op', diffRows(D.old.sources, R.sources));
  }

  /* ---- graphs: pan, zoom, search ---- */
  var G = { key: null, phase: null, group: -1, svg: null, vb: null, nodes: {}, hit: null };
  function graphByKey(k) {
    var gs = D.graphs || [];
    for (var i = 0; i < gs.length; i++) if (gs[i].key === k) return gs[i];
    return null;
  }
  function drawTabs() {
    var tabs = $('graph-tabs');
    (D.graphs || []).forEach(function (g) {
      var b = el('button', { 'class': 'tab', 'data-key': g.key }, g.title);
      b.addEventListener('click', function () { showGraph(g.key); });
      tabs.appendChild(b);
    });
  }
  /* Puts one diagram (SVG text) into the graph box and wires its nodes. */
  function putSvg(svgText) {
    var box = $('graph');
    box.innerHTML = svgText;
    G.svg = box.querySelector('svg'); G.nodes = {}; G.hit = null;
    if (!G.svg) return;
    var vb = G.svg.viewBox.baseVal;
    G.full = { x: vb.x, y: vb.y, w: vb.width, h: vb.height };
    G.svg.removeAttribute('width'); G.svg.removeAttribute('height');
    G.svg.querySelectorAll('g.node').forEach(function (n) {
      var t = n.querySelector('title');
      if (t) G.nodes[t.textContent] = n;
      n.addEventListener('click', function () { nodeClicked(t ? t.textContent : ''); });
    });
    start();
  }
  function markTabs(key) {
    document.querySelectorAll('.tab').forEach(function (t) { t.classList.toggle('active', t.getAttribute('data-key') === key); });
  }
  function showGraph(key, selectIdx) {
    if (TREES[key]) return openGroup(key, 0, selectIdx);
    var g = graphByKey(key);
    if (!g) return false;
    if (G.key !== key) {
      putSvg(g.svg);
      G.key = key; G.phase = key; G.group = -1;
      markTabs(key);
      $('graph-note').textContent = g.note || '';
      $('crumbs').textContent = '';
    }
    if (selectIdx !== undefined) selectNode(nodeIdFor(selectIdx));
    return true;
  }
  /* ---- the group tree of a collapsed phase: a box opens its group ---- */
  function crumbs(phase, g) {
    var T = TREES[phase], box = $('crumbs'), chain = [];
    for (var x = g; x >= 0; x = T.parent[x]) chain.unshift(x);
    box.textContent = '';
    chain.forEach(function (x, k) {
      if (k) box.appendChild(document.createTextNode(' \u203a '));
      var a = el('a', { href: '#', 'data-group': x }, x ? T.name[x] : phase + ' (all)');
      a.addEventListener('click', function (e) { e.preventDefault(); openGroup(phase, x); });
      box.appendChild(a);
    });
  }
  function membersOf(phase, g) {
    var T = TREES[phase], out = [], inside = {};
    inside[g] = true;
    for (var x = g + 1; x < T.parent.length && T.parent[x] >= 0 && inside[T.parent[x]]; x++) inside[x] = true;
    for (var i = 0; i < T.leafOf.length; i++) if (inside[T.leafOf[i]]) out.push(T.lo + i);
    return out;
  }
  var LIST_MAX = 2000;
  function listGroup(phase, g) {
    var T = TREES[phase], box = $('graph');
    G.svg = null; G.nodes = {}; G.hit = null;
    box.innerHTML = '';
    var why = T.why[g] === 1
      ? 'This group is too large to draw: its diagram has ' + T.units[g] + ' nodes and edges, past the budget of ' + T.group_units + ' per diagram.'
      : 'This group was not drawn: the page\'s budget for diagrams (' + T.total_units + ' nodes and edges) went to busier groups.';
    var div = el('div', { 'class': 'group-list', id: 'group-list' });
    div.appendChild(el('p', { 'class': 'too-large' }, why + ' Its ' + T.members[g] + ' instructions are listed; click one to select it.'));
    if (T.kids[g].length) {
      var ul = el('ul');
      T.kids[g].forEach(function (x) {
        var li = el('li'), a = el('a', { href: '#', 'data-group': x }, T.name[x]);
        a.addEventListener('click', function (e) { e.preventDefault(); openGroup(phase, x); });
        li.appendChild(a); li.appendChild(document.createTextNode(' (' + T.members[x] + ' instructions' + (T.send[x] > 0 ? ', sends ' + bytes(T.send[x]) : '') + ')'));
        ul.appendChild(li);
      });
      div.appendChild(el('h3', null, 'groups inside')); div.appendChild(ul);
    }
    var ops = membersOf(phase, g), tbl = el('table', { 'class': 'ops' });
    ops.slice(0, LIST_MAX).forEach(function (idx) {
      var tr = el('tr', { 'data-instr': idx }), a = el('a', { href: '#' }, '%' + D.names[idx]);
      a.addEventListener('click', function (e) { e.preventDefault(); selectOp(idx); tr.classList.add('selected'); });
      var td = el('td'); td.appendChild(a); tr.appendChild(td);
      tr.appendChild(el('td', null, T.name[T.leafOf[idx - T.lo]]));
      tbl.appendChild(tr);
    });
    div.appendChild(el('h3', null, 'instructions' + (ops.length > LIST_MAX ? ' (the first ' + LIST_MAX + ' of ' + ops.length + ')' : '')));
    div.appendChild(tbl);
    box.appendChild(div);
  }
  function openGroup(phase, g, selectIdx) {
    var T = TREES[phase], key = phase + ':' + g;
    if (G.key !== key) {
      var at = T.svg[g];
      if (at === -2) putSvg(graphByKey(phase).svg);
      else if (at >= 0) putSvg(D.tree_svgs[at]);
      else listGroup(phase, g);
      var undrawn = 0;
      T.kids[g].forEach(function (x) { /* boxes that open as a list: dashed */
        var n = G.nodes['h' + x];
        if (n && T.svg[x] === -1) { n.classList.add('undrawn'); undrawn++; }
      });
      G.key = key; G.phase = phase; G.group = g;
      markTabs(phase);
      var gn = graphByKey(phase);
      $('graph-note').textContent = (g ? phase + ': ' + T.name[g] + ', ' + T.members[g] + ' instructions' + (at < 0 ? ' (not drawn)' : '') : (gn && gn.note) || '') +
        (undrawn ? '; ' + undrawn + ' dashed box' + (undrawn === 1 ? '' : 'es') + ' open as a list of their ops (too large to draw, or past the page\'s budget)' : '');
      crumbs(phase, g);
    }
    if (selectIdx !== undefined) selectNode(nodeIdFor(selectIdx));
    return true;
  }
  function setView(x, y, w, h) {
    G.vb = { x: x, y: y, w: w, h: h };
    G.svg.setAttribute('viewBox', x + ' ' + y + ' ' + w + ' ' + h);
  }
  function fit() { if (G.svg) setView(G.full.x, G.full.y, G.full.w, G.full.h); }
  /* The first view: the whole graph, unless it is so tall (or wide) that fitting it would make
   * its text unreadable; then its top (left) end at one screen pixel per point. */
  function start() {
    var r = $('graph').getBoundingClientRect(), f = G.full;
    if (!r.width || !r.height || (f.w <= r.width * 1.5 && f.h <= r.height * 1.5)) return fit();
    var s = Math.max(f.w / r.width, f.h / r.height);
    if (s < 3) return fit();
    var w = Math.max(r.width, Math.min(f.w, r.width * 1.5)), h = w * r.height / r.width;
    if (f.w > f.h) { h = Math.max(r.height, Math.min(f.h, r.height * 1.5)); w = h * r.width / r.height; }
    setView(f.h >= f.w ? f.x + f.w / 2 - w / 2 : f.x, f.y, w, h);
  }
  function zoom(f, cx, cy) {
    if (!G.svg) return;
    var v = G.vb;
    if (cx === undefined) { cx = v.x + v.w / 2; cy = v.y + v.h / 2; }
    setView(cx - (cx - v.x) * f, cy - (cy - v.y) * f, v.w * f, v.h * f);
  }
  function svgPoint(evt) {
    var r = G.svg.getBoundingClientRect(), v = G.vb;
    var s = Math.max(v.w / r.width, v.h / r.height);
    var ox = v.x + (v.w - r.width * s) / 2, oy = v.y + (v.h - r.height * s) / 2;
    return { x: ox + (evt.clientX - r.left) * s, y: oy + (evt.clientY - r.top) * s, s: s };
  }
  function initPanZoom() {
    var box = $('graph'), drag = null;
    box.addEventListener('wheel', function (e) {
      if (!G.svg) return;
      e.preventDefault();
      var p = svgPoint(e);
      zoom(e.deltaY > 0 ? 1.2 : 1 / 1.2, p.x, p.y);
    }, { passive: false });
    box.addEventListener('mousedown', function (e) { if (G.svg) drag = { x: e.clientX, y: e.clientY, vb: G.vb, s: svgPoint(e).s }; });
    window.addEventListener('mousemove', function (e) {
      if (!drag) return;
      setView(drag.vb.x - (e.clientX - drag.x) * drag.s, drag.vb.y - (e.clientY - drag.y) * drag.s, drag.vb.w, drag.vb.h);
    });
    window.addEventListener('mouseup', function () { drag = null; });
    $('zoom-in').addEventListener('click', function () { zoom(1 / 1.5); });
    $('zoom-out').addEventListener('click', function () { zoom(1.5); });
    $('zoom-fit').addEventListener('click', fit);
  }
  /* The node that shows instruction idx in the current graph: its own, the box of the group
   * holding it (a group view), or its computation's box (a graph collapsed per computation). */
  function nodeIdFor(idx) {
    var own = (idx < D.n_before ? 'b' : 'a') + idx;
    if (G.nodes[own]) return own;
    var T = TREES[G.phase];
    if (T && G.group >= 0 && idx >= T.lo && idx - T.lo < T.leafOf.length) {
      for (var x = T.leafOf[idx - T.lo]; x >= 0; x = T.parent[x])
        if (T.parent[x] === G.group) return G.nodes['h' + x] ? 'h' + x : null;
    }
    var c = 'c' + D.comp[idx];
    return G.nodes[c] ? c : null;
  }
  /* A node's box in the SVG's own coordinates (the viewBox's): getBBox is in the node's, which
   * Graphviz's translate on the whole graph moves. */
  function boxInSvg(n) {
    var b = n.getBBox(), m = n.getCTM(), r = G.svg.getCTM();
    if (!m || !r) return b;
    var t = r.inverse().multiply(m), p = G.svg.createSVGPoint(), q = G.svg.createSVGPoint();
    p.x = b.x; p.y = b.y; q.x = b.x + b.width; q.y = b.y + b.height;
    p = p.matrixTransform(t); q = q.matrixTransform(t);
    return { x: Math.min(p.x, q.x), y: Math.min(p.y, q.y), width: Math.abs(q.x - p.x), height: Math.abs(q.y - p.y) };
  }
  function selectNode(id) {
    if (G.hit) G.hit.classList.remove('hit');
    G.hit = null;
    var n = id ? G.nodes[id] : null;
    if (!n) return false;
    n.classList.add('hit'); G.hit = n;
    /* about one screen pixel per point around it (no closer than the whole graph needs) */
    var b = boxInSvg(n), r = $('graph').getBoundingClientRect();
    var w = Math.min(G.full.w, Math.max(r.width || 1200, b.width * 1.5)), h = w * ((r.height || 560) / (r.width || 1200));
    setView(b.x + b.width / 2 - w / 2, b.y + b.height / 2 - h / 2, w, h);
    return true;
  }
  /* Shows instruction idx of `phase`: in a group tree, the innermost drawn group holding it. */
  function selectInstr(idx, phase) {
    var T = TREES[phase];
    if (T && idx >= T.lo && idx - T.lo < T.leafOf.length && T.leafOf[idx - T.lo] >= 0) {
      var g = T.leafOf[idx - T.lo];
      while (g > 0 && T.svg[g] === -1) g = T.parent[g];
      openGroup(phase, g);
      return selectNode(nodeIdFor(idx));
    }
    if (!showGraph(phase)) return false;
    return selectNode(nodeIdFor(idx));
  }
  /* ---- the selected op: where its sharding came from, and why it was partitioned so ---- */
  function originText(o) {
    var S = D.strs || [], n = function (i) { return i >= 0 ? '%' + D.names[i] : '%?'; };
    var t = 'origin: %' + D.names[o[0]] + ' got ' + S[o[1]] + ' ' + S[o[5]];
    if (o[2] >= 0) t += ' from ' + n(o[2]) + (o[3] >= 0 ? ' (parameter ' + o[3] + ', annotated)' : ' (annotated)');
    var path = o[4];
    if (path.length > 2) {
      t += ' through';
      for (var k = 1; k + 1 < path.length; k++) t += (k === 1 ? ' ' : k + 2 === path.length ? ' and ' : ', ') + n(path[k]);
    }
    if (o[6] >= 0) t += ' at level ' + o[6];
    if (o[7] >= 0) t += ' (rule ' + S[o[7]] + ')';
    if (o[8] >= 0 && o[9] >= 0) t += '; merged ' + S[o[8]] + ' with ' + S[o[9]];
    return t;
  }
  function selectOp(idx) {
    var after = idx >= D.n_before, src = after ? (D.derived || [])[idx - D.n_before] : idx;
    var lines = ['%' + D.names[idx] + (after ? ' (after partitioning)' : ' (before partitioning)')];
    if (after) lines.push(src >= 0 ? 'derived from %' + D.names[src] : 'no recorded source instruction');
    var o = src >= 0 ? ORIGIN[src] : null;
    lines.push(o ? originText(o) : (src >= 0 ? 'origin: the sharding of %' + D.names[src] + ' was not set by propagation (annotated, or no propagation ran)' : ''));
    $('op-origin').textContent = o ? originText(o) : '';
    var c = null;
    (D.collectives || []).forEach(function (x) { if (!c && x.source_instr === src && x.explain >= 0) c = x; });
    if (c) lines.push('', D.explain[c.explain].map(function (k) { return D.lines[k]; }).join('\n'));
    $('op').textContent = lines.join('\n');
    $('op').setAttribute('data-instr', String(idx));
  }
  function nodeClicked(id) {
    var m = /^([abcgh])(\d+)$/.exec(id);
    if (!m) return;
    var idx = +m[2];
    if (m[1] === 'h') { openGroup(G.phase, idx); return; }
    if (m[1] === 'c' || m[1] === 'g') {
      $('search-result').textContent = 'collapsed box of %' + D.names[idx] + '; search a name inside it, or use viz --focus';
      return;
    }
    $('search-result').textContent = '%' + D.names[idx];
    selectOp(idx);
    for (var i = 0; i < rows.length; i++) {
      var c = rows[i].c;
      if (c.instr === idx || c.source_instr === idx) { rows[i].tr.scrollIntoView({ block: 'nearest' }); rows[i].tr.click(); break; }
    }
    selectOp(idx);
  }
  function search(q) {
    q = q.trim().replace(/^%/, '');
    if (!q) { $('search-result').textContent = ''; return; }
    var names = D.names || [], exact = -1, part = -1, count = 0;
    var want = G.phase === 'before' ? [0, D.n_before] : [D.n_before, names.length];
    for (var i = 0; i < names.length; i++) {
      var inView = i >= want[0] && i < want[1];
      if (names[i] === q) { if (exact < 0 || (inView && !(exact >= want[0] && exact < want[1]))) exact = i; }
      else if (names[i].indexOf(q) >= 0) { count++; if (part < 0 || (inView && !(part >= want[0] && part < want[1]))) part = i; }
    }
    var idx = exact >= 0 ? exact : part;
    if (idx < 0) { $('search-result').textContent = 'no op named ' + q; return; }
    var phase = idx < D.n_before ? 'before' : 'after';
    var ok = selectInstr(idx, phase);
    selectOp(idx);
    $('search-result').textContent = 'found %' + names[idx] + ' (' + (idx < D.n_before ? 'before' : 'after') + ')' +
      (ok ? '' : ', not drawn in this view') + (exact < 0 && count > 1 ? '; ' + count + ' names contain "' + q + '"' : '');
    $('search-result').setAttribute('data-found', names[idx]);
  }

  /* ---- live bytes over the schedule (memory estimate), the peak marked ---- */
  function drawMemory() {
    var M = D.memory || [];
    if (!M.length) return;
    $('memory-panel').hidden = false;
    var sel = $('memory-select');
    M.forEach(function (m, k) {
      var d = m.devices.length ? 'devices ' + (m.devices.length > 6 ? m.devices[0] + '..' + m.devices[m.devices.length - 1] : m.devices.join(',')) : 'one device';
      sel.appendChild(el('option', { value: k }, (m.phase === 'before' ? 'before partitioning, ' : 'after partitioning, ') + d));
    });
    var first = 0;
    M.forEach(function (m, k) { if (m.phase === 'after' && M[first].phase !== 'after') first = k; });
    sel.value = String(first);
    sel.addEventListener('change', function () { memoryChart(M[+sel.value]); });
    memoryChart(M[first]);
  }
  function memoryChart(m) {
    var NS = 'http://www.w3.org/2000/svg', W = 900, H = 220, L = 70, B = 24, T = 16;
    var box = $('memory-chart'), p = m.profile, step = m.step || 1, n = p.length;
    box.textContent = '';
    var max = 0, at = 0;
    p.forEach(function (v, k) { if (v > max) { max = v; at = k; } });
    var top = Math.max(max, m.peak) || 1;
    var svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('viewBox', '0 0 ' + W + ' ' + H); svg.setAttribute('id', 'memory-svg');
    function mk(tag, attrs, text) {
      var e = document.createElementNS(NS, tag);
      for (var k in attrs) e.setAttribute(k, attrs[k]);
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e); return e;
    }
    var x = function (k) { return L + (n > 1 ? k * (W - L - 10) / (n - 1) : 0); };
    var y = function (v) { return H - B - v * (H - B - T) / top; };
    for (var g = 0; g <= 4; g++) {
      var v = top * g / 4;
      mk('line', { x1: L, x2: W - 10, y1: y(v), y2: y(v), stroke: '#e3e7ec' });
      mk('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', 'font-size': 11, fill: '#6b7785' }, bytes(v));
    }
    var pts = p.map(function (v, k) { return x(k).toFixed(1) + ',' + y(v).toFixed(1); });
    mk('polygon', { points: L + ',' + y(0) + ' ' + pts.join(' ') + ' ' + x(n - 1) + ',' + y(0), fill: '#dbe9f7' });
    mk('polyline', { points: pts.join(' '), fill: 'none', stroke: '#4a7fb5', 'stroke-width': 1.5 });
    mk('text', { x: L, y: H - 6, 'font-size': 11, fill: '#6b7785' }, 'schedule position 0');
    mk('text', { x: W - 10, y: H - 6, 'font-size': 11, fill: '#6b7785', 'text-anchor': 'end' }, String(n * step) + ' (' + step + ' per point)');
    var dot = mk('circle', { cx: x(at), cy: y(max), r: 5, fill: '#d9534f', id: 'memory-peak', 'data-peak': String(m.peak), 'data-max': String(max) });
    var peakName = m.peak_instr >= 0 ? '%' + D.names[m.peak_instr] : '';
    dot.appendChild(document.createElementNS(NS, 'title')).textContent = 'peak ' + bytes(m.peak) + ' at position ' + m.peak_position + ' ' + peakName;
    mk('text', { x: Math.min(x(at) + 8, W - 200), y: Math.max(y(max) - 6, T), 'font-size': 12, fill: '#c0392b', id: 'memory-peak-label' },
       'peak ' + bytes(m.peak) + (peakName ? ' at ' + peakName : ''));
    box.appendChild(svg);
    $('memory-note').textContent = 'parameters ' + bytes(m.parameter) + ', outputs ' + bytes(m.output) + ', peak ' + bytes(m.peak) +
      ' (temporaries ' + bytes(m.peak_temp) + ') at schedule position ' + m.peak_position + (peakName ? ' (' + peakName + ')' : '') +
      '; each point is the most live at once over ' + step + ' position' + (step === 1 ? '' : 's') + '.';
    var tb = $('memory-top');
    tb.textContent = '';
    var h = el('tr');
    ['buffer', 'bytes', 'kind', 'op_name'].forEach(function (k) { h.appendChild(el('th', null, k)); });
    tb.appendChild(h);
    m.top.forEach(function (b) {
      var tr = el('tr'), td = el('td');
      if (b.instr >= 0) {
        var a = el('a', { href: '#' }, '%' + D.names[b.instr]);
        a.addEventListener('click', function (e) { e.preventDefault(); selectInstr(b.instr, b.instr < D.n_before ? 'before' : 'after'); selectOp(b.instr); });
        td.appendChild(a);
      }
      tr.appendChild(td);
      tr.appendChild(el('td', { 'class': 'num' }, bytes(b.bytes)));
      tr.appendChild(el('td', null, (D.strs || [])[b.kind] || ''));
      tr.appendChild(el('td', null, b.op_name || ''));
      tb.appendChild(tr);
    });
  }

  function main() {
    var steps = [], t0 = performance.now();
    function step(name, f) { f(); var t = performance.now(); steps.push(name + ' ' + Math.round(t - t0)); t0 = t; }
    step('totals', drawTotals);
    step('diff', drawDiff);
    step('bars', drawBars);
    step('mesh', drawMesh);
    step('table', drawTable);
    step('tree', drawTree);
    step('warnings', drawWarnings);
    step('memory', drawMemory);
    step('tabs', drawTabs);
    initPanZoom();
    $('search').addEventListener('keydown', function (e) { if (e.key === 'Enter') search($('search').value); });
    $('search').addEventListener('change', function () { search($('search').value); });
    step('layout', function () { return document.body.offsetHeight; });
    step('graph', function () { if (D.graphs && D.graphs.length) showGraph(graphByKey('after') ? 'after' : D.graphs[0].key); });
    /* ms per step, and when the script started (parsing the page and its data before it) */
    document.body.setAttribute('data-steps', 'start ' + Math.round(T_START) + ', ' + steps.join(', '));
    document.body.setAttribute('data-ready', String(Math.round(performance.now())));
  }
  main();
}());
