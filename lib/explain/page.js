// spmdc explain's renderer: reads the JSON in #spmd-data and draws the
// views with DOM and hand-written SVG (no third-party code, no network).
// Everything renders synchronously before the load event, so a headless
// browser's --dump-dom sees the finished page; when done, the hidden
// #spmd-test-hook element gets the counts the browser test compares
// (rendered collectives and modules) and the time the page took.
(function () {
  'use strict';
  const SVG = 'http://www.w3.org/2000/svg';
  const KIND_COLORS = {all_reduce: '#d62728', all_gather: '#1f77b4', reduce_scatter: '#2ca02c', all_to_all: '#9467bd'};
  const MEM_COLORS = {parameters: '#4e79a7', buffers: '#a0cbe8', optimizer_states: '#f28e2b', gradients: '#e15759',
    activations: '#59a14f'};
  const hook = document.getElementById('spmd-test-hook');
  const app = document.getElementById('app');

  // ---- small helpers ----
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) {
      if (k === 'onclick') e.addEventListener('click', attrs[k]);
      else if (k === 'text') e.textContent = attrs[k];
      else e.setAttribute(k, attrs[k]);
    }
    for (const c of kids) if (c !== null && c !== undefined) e.append(c);
    return e;
  }
  function sv(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function bytes(n) {
    if (n === null || n === undefined) return '-';
    const a = Math.abs(n);
    const units = [['GiB', 1 << 30], ['MiB', 1 << 20], ['KiB', 1 << 10]];
    for (const [u, s] of units) if (a >= s) return (n / s).toFixed(a >= 10 * s ? 1 : 2) + ' ' + u;
    return n + ' B';
  }
  function num(n) { return Number(n).toLocaleString('en-US'); }
  function shape(s) { return '[' + s.join(', ') + ']'; }
  function table(head, rows, cls) {
    const t = el('table', {class: cls || 'grid'});
    t.append(el('tr', {}, ...head.map((h) => el('th', {text: h}))));
    for (const r of rows) t.append(el('tr', {}, ...r.map((c) => (c instanceof Node ? el('td', {}, c) : el('td', {text: c})))));
    return t;
  }
  function section(title, ...kids) { return el('section', {}, el('h2', {text: title}), ...kids); }

  // ---- per-program derived data ----
  function prepare(p) {
    const mods = p.modules;
    for (const m of mods) { m.children = []; m.weights = []; m.subOps = m.ops; m.subBytes = 0; }
    for (let i = mods.length - 1; i > 0; i--) {
      mods[mods[i].parent].children.unshift(i);
    }
    p.weights.forEach((w, i) => { mods[w.module].weights.push(i); });
    for (let i = mods.length - 1; i >= 0; i--) {
      const m = mods[i];
      for (const w of m.weights) m.subBytes += p.weights[w].bytes_per_rank;
      if (i > 0) { mods[m.parent].subOps += m.subOps; mods[m.parent].subBytes += m.subBytes; }
    }
    // Timeline lanes: a module up to its first numbered segment
    // (model.layers.3), else its first two segments.
    const laneOf = new Array(mods.length);
    const laneIndex = new Map();
    p.lanes = [];
    for (let i = 0; i < mods.length; i++) {
      const segs = mods[i].path === '' ? [] : mods[i].path.split('.');
      let cut = segs.findIndex((s) => /^\d+$/.test(s));
      cut = cut < 0 ? Math.min(2, segs.length) : cut + 1;
      const key = segs.slice(0, cut).join('.');
      laneOf[i] = key;
    }
    const opMod = p.ops.module;
    p.opLane = new Int32Array(opMod.length);
    for (let i = 0; i < opMod.length; i++) {
      const key = laneOf[opMod[i]];
      let lane = laneIndex.get(key);
      if (lane === undefined) { lane = p.lanes.length; laneIndex.set(key, lane); p.lanes.push(key); }
      p.opLane[i] = lane;
    }
    p.prepared = true;
  }

  // ---- header and summary ----
  function summaryChips(p) {
    const s = p.summary;
    const items = [['mesh', shape(p.mesh.shape) + ' (' + p.mesh.axes.join(', ') + '), ' + p.mesh.ranks + ' ranks'],
      ['ops', num(s.ops)], ['collectives', num(s.collectives)], ['sent per rank', bytes(s.bytes_per_rank)],
      ['weights per rank', bytes(s.weight_bytes)], ['peak estimate', bytes(s.peak_bytes_estimate)]];
    return el('div', {class: 'chips'}, ...items.map(([k, v]) => el('span', {class: 'chip'}, el('b', {text: k}), ' ' + v)));
  }

  // ---- module tree ----
  function placementText(p, w) {
    return w.spec.map((pl, a) => p.mesh.axes[a] + ': ' + pl).join(', ') || 'R';
  }
  function localText(w) {
    if (!w.rank_shapes) return shape(w.local) + ' on every rank';
    const byShape = new Map();
    w.rank_shapes.forEach((s, r) => { const k = shape(s); if (!byShape.has(k)) byShape.set(k, []); byShape.get(k).push(r); });
    return [...byShape].map(([s, rs]) => 'rank' + (rs.length > 1 ? 's ' : ' ') + rs.join(',') + ': ' + s).join('; ');
  }
  function weightTable(p, idx) {
    return table(['weight', 'kind', 'dtype', 'global', 'placement', 'local shape per rank', 'bytes/rank'],
      idx.map((i) => { const w = p.weights[i];
        return [w.fqn, w.kind.replace('_', ' '), w.dtype, shape(w.global), placementText(p, w), localText(w), bytes(w.bytes_per_rank)]; }),
      'grid weights');
  }
  function moduleNode(p, i) {
    const m = p.modules[i];
    const name = m.path.slice(m.path.lastIndexOf('.') + 1);
    const body = el('div', {class: 'mod-body', hidden: ''});
    const open = el('span', {class: 'twisty', text: '\u25b8'});
    let filled = false;
    const row = el('div', {class: 'mod-row', 'data-path': m.path}, open, el('span', {class: 'mod-name', text: name}),
      el('span', {class: 'mod-type', text: m.type ? m.type.slice(m.type.lastIndexOf('.') + 1) : ''}),
      el('span', {class: 'mod-stat', text: m.weights.length + ' weights, ' + num(m.subOps) + ' ops, ' + bytes(m.subBytes) + '/rank'}));
    row.addEventListener('click', () => {
      if (!filled && m.weights.length) body.prepend(weightTable(p, m.weights)); // lazily
      filled = true;
      body.hidden = !body.hidden;
      open.textContent = body.hidden ? '\u25b8' : '\u25be';
    });
    for (const c of m.children) body.append(moduleNode(p, c));
    return el('div', {class: 'mod'}, row, body);
  }
  function modulesView(p) {
    const root = p.modules[0];
    const note = p.module_source === 'nn_module_stack' ? 'Modules from the export\'s nn_module_stack.'
      : 'This export carries no nn_module_stack (a joint train step): modules come from weight names, and each op is placed with the weight it reads.';
    const tree = el('div', {class: 'tree'});
    if (root.weights.length) tree.append(weightTable(p, root.weights));
    for (const c of root.children) tree.append(moduleNode(p, c));
    return section('Modules', el('p', {class: 'note', text: note + ' Click a module for its weights: placement per mesh axis and local shape per rank.'}), tree);
  }

  // ---- timeline ----
  function detailOfCollective(p, c) {
    const names = p.ops.name;
    const rows = [['kind', c.kind], ['mesh axis', c.axis], ['bytes per rank', bytes(c.bytes) + ' (' + num(c.bytes) + ' B)'],
      ['value', c.value], ['placements', (c.from || '?') + ' \u2192 ' + (c.to || '?')], ['needed by', c.consumer || '-'],
      ['Python line', c.source_line || '-'], ['module', p.modules[c.module].path || '(root)'],
      ['issued at', '#' + c.index + ' ' + names[c.index]],
      ['waited at', c.wait >= 0 ? '#' + c.wait + ' ' + names[c.wait] + ' (' + (c.wait - c.index) + ' ops overlap)' : 'synchronous']];
    return table(['', c.node], rows, 'grid kv');
  }
  function detailOfRun(p, lane, a, b) {
    const t = p.ops.targets, names = p.ops.name, tg = p.ops.target, mod = p.ops.module;
    const rows = [];
    for (let i = a; i <= b && rows.length < 400; i++) rows.push(['#' + i, names[i], t[tg[i]], p.modules[mod[i]].path || '(root)']);
    const more = b - a + 1 > rows.length ? el('p', {text: '... ' + (b - a + 1 - rows.length) + ' more ops'}) : null;
    return el('div', {}, el('h3', {text: (p.lanes[lane] || '(root)') + ': ops ' + a + '\u2013' + b}),
      table(['#', 'op', 'target', 'module'], rows), more);
  }
  function timelineView(p) {
    const n = p.ops.name.length, lanes = p.lanes, axes = p.mesh.axes;
    const W = 1200, left = 170, right = 10, rowH = 13, top = 18;
    const collTop = top, lanesTop = collTop + axes.length * (rowH + 4) + 8;
    const H = lanesTop + lanes.length * rowH + 20;
    const x = (i) => left + (n ? (i / n) * (W - left - right) : 0);
    const svg = sv('svg', {viewBox: '0 0 ' + W + ' ' + H, width: '100%', class: 'timeline'});
    const detail = el('div', {class: 'detail', text: 'Click a collective or an op group.'});
    svg.append(sv('text', {x: 4, y: 12, class: 'axis-label'}, 'program order: ' + num(n) + ' ops \u2192'));
    axes.forEach((a, k) => {
      const y = collTop + k * (rowH + 4);
      svg.append(sv('text', {x: 4, y: y + rowH - 3, class: 'lane-label'}, 'collectives on ' + a));
      svg.append(sv('rect', {x: left, y: y, width: W - left - right, height: rowH, class: 'lane-bg'}));
    });
    lanes.forEach((l, k) => {
      const y = lanesTop + k * rowH;
      svg.append(sv('text', {x: 4, y: y + rowH - 3, class: 'lane-label'}, l || '(root)'));
    });
    // Op groups: one rect per run of consecutive ops in one lane.
    const runs = sv('g', {class: 'runs'});
    const runList = [];
    for (let i = 0; i < n;) {
      let j = i;
      while (j + 1 < n && p.opLane[j + 1] === p.opLane[i]) j++;
      runList.push([p.opLane[i], i, j]);
      const r = sv('rect', {x: x(i), y: lanesTop + p.opLane[i] * rowH + 1, width: Math.max(1, x(j + 1) - x(i)), height: rowH - 2,
        class: 'run', 'data-r': runList.length - 1});
      runs.append(r);
      i = j + 1;
    }
    runs.addEventListener('click', (e) => {
      const r = runList[e.target.getAttribute('data-r')];
      if (r) detail.replaceChildren(detailOfRun(p, r[0], r[1], r[2]));
    });
    svg.append(runs);
    const colls = sv('g', {class: 'colls'});
    p.collectives.forEach((c, k) => {
      const a = Math.max(0, axes.indexOf(c.axis));
      const y = collTop + a * (rowH + 4);
      const g = sv('g', {class: 'coll', 'data-c': k});
      const end = c.wait >= 0 ? c.wait : c.index;
      g.append(sv('rect', {x: x(c.index), y: y + 3, width: Math.max(1, x(end + 1) - x(c.index)), height: rowH - 6,
        fill: KIND_COLORS[c.kind] || '#777', class: 'span'}));
      g.append(sv('rect', {x: x(c.index), y: y, width: 2, height: rowH, fill: KIND_COLORS[c.kind] || '#777', 'data-c': k}));
      colls.append(g);
    });
    colls.addEventListener('click', (e) => {
      const k = e.target.getAttribute('data-c') || e.target.parentNode.getAttribute('data-c');
      if (k !== null) detail.replaceChildren(detailOfCollective(p, p.collectives[k]));
    });
    svg.append(colls);
    const legend = el('div', {class: 'legend'}, ...Object.keys(KIND_COLORS).map((k) =>
      el('span', {}, el('i', {style: 'background:' + KIND_COLORS[k]}), k.replace('_', '-'))),
    el('span', {text: 'bar: issue \u2192 wait (async overlap)'}));
    return section('Timeline', el('p', {class: 'note', text: 'Ops in program order, one row per module group; collectives on top, one row per mesh axis.'}),
      legend, el('div', {class: 'scroll'}, svg), detail, collectiveList(p, detail));
  }
  function collectiveList(p, detail) {
    const rows = p.collectives.map((c, k) => [String(k), c.kind, c.axis, bytes(c.bytes), c.value, (c.from || '?') + ' \u2192 ' + (c.to || '?'),
      c.consumer, c.source_line]);
    const t = table(['#', 'kind', 'axis', 'bytes/rank', 'value', 'placements', 'needed by', 'Python line'], rows, 'grid colls-table');
    t.addEventListener('click', (e) => {
      const tr = e.target.closest('tr');
      const k = tr && tr.rowIndex > 0 ? tr.rowIndex - 1 : -1;
      if (k >= 0) { detail.replaceChildren(detailOfCollective(p, p.collectives[k])); detail.scrollIntoView({block: 'nearest'}); }
    });
    return el('details', {}, el('summary', {text: 'All ' + p.collectives.length + ' collectives'}), t);
  }

  // ---- memory ----
  function memoryView(p) {
    const m = p.memory, classes = m.rank_classes;
    const out = section('Memory per rank');
    const chartBox = el('div', {});
    const rankText = (c) => c.ranks.map(([a, b]) => (a === b ? a : a + '\u2013' + b)).join(', ');
    let current = 0;
    const pick = el('div', {class: 'tabs small'});
    function draw() {
      chartBox.replaceChildren(memoryChart(p, classes[current]));
      pick.querySelectorAll('button').forEach((b, i) => b.classList.toggle('on', i === current));
    }
    classes.forEach((c, i) => pick.append(el('button', {text: 'rank' + (c.ranks.length > 1 || c.ranks[0][0] !== c.ranks[0][1] ? 's ' : ' ') + rankText(c),
      onclick: () => { current = i; draw(); }})));
    out.append(el('p', {class: 'note', text: 'Estimated live bytes over program order, as spmdc compile estimates its peak: weights live throughout, other tensors from their producer to their last reader. ' +
      (classes.length > 1 ? 'Ranks hold different shards (uneven splits): pick a rank.' : 'Every rank holds the same bytes.')}), pick, chartBox);
    draw();
    const pk = m.peak;
    if (pk.node >= 0) {
      out.append(el('h3', {text: 'Live at the peak (op #' + pk.node + ' ' + p.ops.name[pk.node] + ', ' + pk.live_values + ' tensors besides the weights)'}),
        table(['tensor', 'bytes', 'kind', 'module'], pk.live.map((v) => [v.value, bytes(v.bytes), v.category, v.module >= 0 ? (p.modules[v.module].path || '(root)') : 'input'])));
    }
    if (p.measured) out.append(measuredTable(p));
    return out;
  }
  // The peaks spmd-run --profile measured, beside each rank's estimate.
  function measuredTable(p) {
    const m = p.memory;
    const estimate = (rank) => {
      const c = m.rank_classes.find((k) => k.ranks.some(([a, b]) => a <= rank && rank <= b)) || m.rank_classes[0];
      return Object.values(c.static).reduce((x, y) => x + y, 0) + m.peak.dynamic_bytes;
    };
    const mib = (n) => (n / 1048576).toFixed(1) + ' MiB';
    return el('div', {class: 'measured'},
      el('h3', {text: 'Measured peak per rank (' + p.measured.files.join(', ') + ')'}),
      el('p', {class: 'note', text: 'Peak live tensor bytes from loading the weights to the end of the last step (on a GPU the caching allocator\'s peak allocated bytes); state: live before the first step; RSS growth: the process\'s resident set, which also counts allocator caches and library state.'}),
      table(['rank', 'estimated peak', 'measured peak', 'state', 'RSS growth', 'step', 'sent per step'],
        p.measured.ranks.map((r) => [r.rank, bytes(estimate(r.rank)), bytes(r.peak_bytes), bytes(r.state_bytes || 0), mib(r.rss_growth_bytes || 0), r.step_ms.toFixed(2) + ' ms', bytes(r.bytes_sent)])));
  }
  function memoryChart(p, cls) {
    const m = p.memory, pts = m.points, n = p.ops.name.length;
    const W = 1200, H = 300, left = 80, right = 10, top = 10, bottom = 30;
    const st = cls.static;
    const layers = [['parameters', () => st.parameters], ['buffers', () => st.buffers], ['optimizer_states', () => st.optimizer_states],
      ['gradients', (k) => m.series.gradients[k]], ['activations', (k) => m.series.activations[k]]];
    let max = 1;
    const base = new Float64Array(pts.length);
    const tops = layers.map(([, f]) => {
      const t = new Float64Array(pts.length);
      for (let k = 0; k < pts.length; k++) { t[k] = base[k] + f(k); }
      base.set(t);
      return t;
    });
    for (let k = 0; k < pts.length; k++) max = Math.max(max, base[k]);
    const x = (i) => left + (n > 1 ? (i / (n - 1)) * (W - left - right) : 0);
    const y = (v) => top + (H - top - bottom) * (1 - v / max);
    const svg = sv('svg', {viewBox: '0 0 ' + W + ' ' + H, width: '100%', class: 'memory'});
    let below = null;
    layers.forEach(([name], li) => {
      const t = tops[li];
      let d = '';
      for (let k = 0; k < pts.length; k++) d += (k ? 'L' : 'M') + x(pts[k]).toFixed(1) + ' ' + y(t[k]).toFixed(1);
      for (let k = pts.length - 1; k >= 0; k--) d += 'L' + x(pts[k]).toFixed(1) + ' ' + y(below ? below[k] : 0).toFixed(1);
      svg.append(sv('path', {d: d + 'Z', fill: MEM_COLORS[name], class: 'layer'}));
      below = t;
    });
    for (let k = 0; k <= 4; k++) {
      const v = (max * k) / 4;
      svg.append(sv('line', {x1: left, x2: W - right, y1: y(v), y2: y(v), class: 'gridline'}));
      svg.append(sv('text', {x: left - 4, y: y(v) + 4, 'text-anchor': 'end', class: 'tick'}, bytes(Math.round(v))));
    }
    const pk = m.peak;
    if (pk.node >= 0) {
      const total = st.parameters + st.buffers + st.optimizer_states + pk.dynamic_bytes;
      svg.append(sv('line', {x1: x(pk.node), x2: x(pk.node), y1: top, y2: H - bottom, class: 'peak'}));
      svg.append(sv('text', {x: Math.min(x(pk.node) + 4, W - 260), y: top + 12, class: 'peak-label'}, 'peak ' + bytes(total) + ' at op #' + pk.node));
    }
    svg.append(sv('text', {x: left, y: H - 8, class: 'axis-label'}, 'program order (' + num(n) + ' ops) \u2192'));
    const legend = el('div', {class: 'legend'}, ...layers.map(([name], li) => el('span', {}, el('i', {style: 'background:' + MEM_COLORS[name]}),
      name.replace('_', ' ') + (li < 3 ? ' ' + bytes(st[name]) : ''))));
    return el('div', {}, legend, svg);
  }

  // ---- communication ----
  function bars(rows, label, color) {
    const max = Math.max(1, ...rows.map((r) => r.bytes));
    return el('div', {class: 'bars'}, ...rows.map((r) => el('div', {class: 'bar-row'}, el('span', {class: 'bar-label', text: label(r)}),
      el('span', {class: 'bar', style: 'width:' + (100 * r.bytes / max).toFixed(1) + '%;background:' + color(r)}),
      el('span', {class: 'bar-value', text: bytes(r.bytes) + ' in ' + r.count}))));
  }
  function communicationView(p) {
    const c = p.communication;
    if (!p.collectives.length) return section('Communication', el('p', {text: 'This program communicates nothing: no collectives.'}));
    const top = c.top.map((k) => { const x = p.collectives[k]; return [String(k), x.kind, x.axis, bytes(x.bytes), x.value, x.consumer, x.source_line]; });
    return section('Communication', el('p', {class: 'note', text: 'Bytes each rank sends per step.'}),
      el('h3', {text: 'Per mesh axis'}), bars(c.by_axis, (r) => r.axis, () => '#4e79a7'),
      el('h3', {text: 'Per collective kind'}), bars(c.by_kind, (r) => r.kind, (r) => KIND_COLORS[r.kind] || '#777'),
      el('h3', {text: 'Per axis and kind'}), table(['axis', 'kind', 'count', 'bytes/rank'], c.by_axis_kind.map((r) => [r.axis, r.kind, num(r.count), bytes(r.bytes)])),
      el('h3', {text: 'Top collectives by bytes'}), table(['#', 'kind', 'axis', 'bytes/rank', 'value', 'needed by', 'Python line'], top));
  }

  // ---- comparison ----
  function delta(a, b) { return typeof a === 'number' && typeof b === 'number' ? (b - a > 0 ? '+' : '') + num(b - a) : ''; }
  function compareView(d, pa, pb) {
    const coll = (list) => list.map((c) => [c.kind, c.axis, c.value, c.from + ' \u2192 ' + c.to, String(c.count), bytes(c.bytes)]);
    const head = ['kind', 'axis', 'value', 'placements', 'count', 'bytes/rank each'];
    return section('Compare: A = ' + pa.label + ', B = ' + pb.label,
      table(['', 'A', 'B', 'B \u2212 A'], d.summary.map((r) => [r.what.replace(/_/g, ' '), num(r.a), num(r.b), delta(r.a, r.b)])),
      el('h3', {text: 'Placements changed (' + d.placements.length + ')'}),
      table(['weight', 'A', 'B', 'local A', 'local B', 'bytes/rank A', 'bytes/rank B'],
        d.placements.map((r) => [r.fqn, shape(r.a), shape(r.b), shape(r.a_local), shape(r.b_local), bytes(r.a_bytes), bytes(r.b_bytes)])),
      el('p', {text: 'Weights only in A: ' + (d.weights_only_in_a.join(', ') || 'none') + '; only in B: ' + (d.weights_only_in_b.join(', ') || 'none')}),
      el('h3', {text: 'Collectives removed in B (' + d.collectives.removed.length + ')'}), table(head, coll(d.collectives.removed)),
      el('h3', {text: 'Collectives added in B (' + d.collectives.added.length + ')'}), table(head, coll(d.collectives.added)),
      el('h3', {text: 'Bytes per mesh axis'}), table(['axis', 'A', 'B', 'B \u2212 A'], d.bytes_by_axis.map((r) => [r.axis, bytes(r.a), bytes(r.b), delta(r.a, r.b)])),
      el('h3', {text: 'Bytes per kind'}), table(['kind', 'A', 'B', 'B \u2212 A'], d.bytes_by_kind.map((r) => [r.kind, bytes(r.a), bytes(r.b), delta(r.a, r.b)])));
  }

  // ---- page ----
  const VIEWS = [['modules', 'Modules', modulesView], ['timeline', 'Timeline', timelineView], ['memory', 'Memory', memoryView],
    ['communication', 'Communication', communicationView]];
  function render(data) {
    const programs = data.programs;
    let current = 0, tab = data.diff ? 'compare' : 'modules';
    const asked = (location.hash || '').slice(1); // report.html#timeline opens that view
    if (asked === 'compare' ? data.diff : VIEWS.some(([id]) => id === asked)) tab = asked;
    const body = el('div', {});
    const nav = el('nav', {class: 'tabs'});
    const chooser = el('div', {class: 'tabs small'});
    function show() {
      const p = programs[current];
      if (!p.prepared) prepare(p);
      document.title = 'spmdc explain: ' + programs.map((q) => q.label).join(' vs ');
      body.replaceChildren();
      const views = [];
      if (data.diff) views.push(['compare', 'Compare', () => compareView(data.diff, programs[0], programs[1])]);
      views.push(...VIEWS);
      nav.replaceChildren(...views.map(([id, name]) => el('button', {text: name, class: id === tab ? 'on' : '', onclick: () => { tab = id; show(); }})));
      chooser.replaceChildren(...(programs.length > 1 ? programs.map((q, i) => el('button', {text: (i ? 'B: ' : 'A: ') + q.label,
        class: i === current ? 'on' : '', onclick: () => { current = i; show(); }})) : []));
      // Every view is built (the hidden ones too), so the hook's counts do
      // not depend on the tab shown.
      for (const [id, , f] of views) {
        const v = el('div', {id: 'view-' + id, class: 'view'}, f(p));
        v.hidden = id !== tab;
        body.append(v);
      }
      chips.replaceChildren(summaryChips(p));
      hook.setAttribute('data-program', String(current));
      hook.setAttribute('data-collectives', String(body.querySelectorAll('#view-timeline .coll').length));
      hook.setAttribute('data-modules', String(body.querySelectorAll('#view-modules .mod-row').length));
    }
    const p0 = programs[0];
    const chips = el('div', {id: 'chips'});
    app.replaceChildren(el('header', {}, el('h1', {}, 'spmdc explain ', el('span', {class: 'label', text: programs.map((q) => q.label).join(' vs ')})),
      el('div', {class: 'sub', text: p0.name + (p0.provenance.schema ? ', schema ' + p0.provenance.schema : '')})), chooser, chips, nav, body);
    show();
  }

  try {
    const data = JSON.parse(document.getElementById('spmd-data').textContent);
    render(data);
    hook.setAttribute('data-programs', String(data.programs.length));
    hook.setAttribute('data-render-ms', String(Math.round(performance.now())));
    hook.setAttribute('data-status', 'ok');
  } catch (e) {
    hook.setAttribute('data-status', 'error: ' + e.message);
    app.textContent = 'spmdc explain could not render this page: ' + e.message;
    throw e;
  }
})();
