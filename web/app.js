// The anxin agent's live page: polls the agent's JSON endpoints (relative
// URLs, so it works wherever the page is served from: TLS, basic auth, a
// reverse proxy or an ssh tunnel) and draws them with uPlot.
//
// window.anxinPage tells tests and curious users what the page has drawn:
//   { ready, polls, failures, errors: [...], charts: {id: points drawn},
//     devices, jobs, events, lastError }
'use strict';

(function () {
  const page = {
    ready: false,
    polls: 0,
    failures: 0,
    errors: [],
    charts: {},
    devices: 0,
    jobs: 0,
    events: 0,
    lastError: null,
  };
  window.anxinPage = page;
  window.addEventListener('error', (e) => page.errors.push(String(e.message)));
  window.addEventListener('unhandledrejection', (e) => page.errors.push(String(e.reason)));

  const palette = [
    '#3b6fd4', '#d13438', '#1f9d55', '#c98a00', '#8a4fd1', '#00a3a3', '#e0569b', '#6b7385',
    '#2f4b7c', '#ff7c43', '#7aa63b', '#a05195', '#003f5c', '#f95d6a', '#665191', '#d45087',
  ];
  const GiB = 1024 * 1024 * 1024;
  const MAX_TIMELINE = 500;

  const deviceMetrics = [
    { id: 'hbm', key: 'hbm_used_bytes', title: 'HBM used', unit: 'GiB', scale: 1 / GiB, digits: 1 },
    { id: 'temperature', key: 'temperature_celsius', title: 'Temperature', unit: '°C', scale: 1, digits: 1 },
    { id: 'power', key: 'power_watts', title: 'Power', unit: 'W', scale: 1, digits: 0 },
    { id: 'utilisation', key: 'utilisation_percent', title: 'Utilisation', unit: '%', scale: 1, digits: 0 },
  ];

  // What the page keeps: the same window as the agent.
  const store = {
    windowSeconds: 600,
    interval: 1,
    devices: new Map(), // index -> {meta, t, values: {key: []}}
    jobs: new Map(), // job -> {meta, t, step, step_seconds, busbw: {op: []}, jitter: {k: []}}
    lastDeviceT: 0,
    lastJobT: 0,
    lastEvent: 0,
  };
  const charts = new Map(); // id -> {plot, signature, el}

  function $(id) { return document.getElementById(id); }

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  async function getJSON(path) {
    const r = await fetch(path, { cache: 'no-store', credentials: 'same-origin' });
    if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
    return r.json();
  }

  // Drops points older than the window from parallel arrays.
  function trim(series, arrays) {
    const t = series.t;
    if (!t.length) return;
    const oldest = t[t.length - 1] - store.windowSeconds;
    let n = 0;
    while (n < t.length && t[n] < oldest) n++;
    if (n === 0) return;
    for (const a of arrays) a.splice(0, n);
  }

  function fmt(v, digits) {
    if (v === null || v === undefined || Number.isNaN(v)) return '-';
    return v.toFixed(digits);
  }

  function fmtBandwidth(v) {
    if (v === null || v === undefined) return '-';
    return (v / 1e9).toFixed(2) + ' GB/s';
  }

  function fmtSeconds(v) {
    if (v === null || v === undefined) return '-';
    if (v < 1e-3) return (v * 1e6).toFixed(0) + ' us';
    if (v < 1) return (v * 1e3).toFixed(1) + ' ms';
    return v.toFixed(2) + ' s';
  }

  function chartWidth(node) {
    return Math.max(260, Math.floor(node.clientWidth || node.parentNode.clientWidth || 400));
  }

  // Draws (or redraws) chart `id` in `node`: x = unix seconds, one series per
  // entry of `lines` ({label, values}). A new set of lines makes a new plot.
  function draw(id, node, title, unit, x, lines, format) {
    const signature = lines.map((l) => l.label).join('\u0000');
    const data = [x].concat(lines.map((l) => l.values));
    let c = charts.get(id);
    if (!c || c.signature !== signature || c.node !== node) {
      if (c) c.plot.destroy();
      const opts = {
        title: title,
        width: chartWidth(node),
        height: 200,
        scales: { x: { time: true } },
        series: [{}].concat(lines.map((l, i) => ({
          label: l.label,
          stroke: palette[i % palette.length],
          width: 1.5,
          value: (u, v) => format(v),
        }))),
        axes: [
          {},
          { label: unit, size: 84, values: (u, splits) => splits.map((v) => format(v)) },
        ],
        legend: { live: true },
        // A live chart redraws every poll, which would undo a zoom at once.
        cursor: { drag: { x: false, y: false } },
      };
      c = { plot: new uPlot(opts, data, node), signature: signature, node: node };
      charts.set(id, c);
    } else {
      c.plot.setData(data);
    }
    let points = 0;
    for (const l of lines) for (const v of l.values) if (v !== null && v !== undefined) points++;
    page.charts[id] = points;
    node.dataset.points = String(points);
  }

  function mergeDevices(h) {
    store.windowSeconds = h.window_seconds || store.windowSeconds;
    store.interval = h.interval_seconds || store.interval;
    $('node').textContent = h.node ? 'node ' + h.node : '';
    $('source').textContent = h.source || '';
    $('window').textContent = 'last ' + Math.round(store.windowSeconds / 60) + ' min, every ' +
      store.interval + ' s';
    const seen = new Set();
    for (const d of h.devices) {
      seen.add(d.index);
      let s = store.devices.get(d.index);
      if (!s) {
        s = { t: [], values: {} };
        for (const m of deviceMetrics) s.values[m.key] = [];
        store.devices.set(d.index, s);
      }
      s.meta = d;
      for (let i = 0; i < d.t.length; i++) {
        s.t.push(d.t[i]);
        for (const m of deviceMetrics) s.values[m.key].push(d[m.key][i]);
        store.lastDeviceT = Math.max(store.lastDeviceT, d.t[i]);
      }
      trim(s, [s.t].concat(deviceMetrics.map((m) => s.values[m.key])));
    }
    for (const index of Array.from(store.devices.keys())) {
      if (!seen.has(index)) store.devices.delete(index);
    }
    page.devices = store.devices.size;
  }

  function drawDevices() {
    const devices = Array.from(store.devices.values()).sort((a, b) => a.meta.index - b.meta.index);
    for (const m of deviceMetrics) {
      const tables = devices.map((d) => [d.t, d.values[m.key].map((v) => (v === null ? null : v * m.scale))]);
      const joined = tables.length ? uPlot.join(tables) : [[]];
      const lines = devices.map((d, i) => ({ label: d.meta.label, values: joined[i + 1] || [] }));
      draw('device:' + m.id, $('chart-' + m.id), m.title + ' (' + m.unit + ')', m.unit, joined[0], lines,
        (v) => fmt(v, m.digits));
    }
    const body = $('device-table').tBodies[0];
    body.textContent = '';
    for (const d of devices) {
      const meta = d.meta;
      const last = (key) => {
        const a = d.values[key];
        return a.length ? a[a.length - 1] : null;
      };
      const tr = el('tr', { 'data-device': String(meta.index) });
      tr.appendChild(el('td', {}, meta.label));
      tr.appendChild(el('td', {}, meta.model));
      const health = el('td');
      health.appendChild(el('span', { class: 'badge ' + (meta.health || '') }, meta.health || '-'));
      tr.appendChild(health);
      const used = last('hbm_used_bytes');
      const total = meta.hbm_total_bytes;
      tr.appendChild(el('td', { class: 'num' }, used === null ? '-'
        : fmt(used / GiB, 1) + (total ? ' / ' + fmt(total / GiB, 0) + ' GiB (' + fmt(100 * used / total, 0) + ' %)' : ' GiB')));
      const temp = last('temperature_celsius');
      const hot = temp !== null && temp >= 85;
      tr.appendChild(el('td', { class: 'num' + (hot ? ' hot' : '') }, temp === null ? '-' : fmt(temp, 1) + ' °C'));
      const power = last('power_watts');
      tr.appendChild(el('td', { class: 'num' }, power === null ? '-' : fmt(power, 0) + ' W'));
      const util = last('utilisation_percent');
      tr.appendChild(el('td', { class: 'num' }, util === null ? '-' : fmt(util, 0) + ' %'));
      const links = el('td');
      for (const l of meta.links) {
        links.appendChild(el('span', {
          class: 'link ' + (l.up ? 'up' : 'down'),
          title: 'port ' + l.port + (l.up ? ' up' : ' down'),
          'data-port': String(l.port),
        }));
      }
      if (!meta.links.length) links.textContent = '-';
      tr.appendChild(links);
      body.appendChild(tr);
    }
  }

  function mergeJobs(j) {
    const seen = new Set();
    for (const job of j.jobs) {
      seen.add(job.job);
      let s = store.jobs.get(job.job);
      if (!s) {
        s = { t: [], step: [], step_seconds: [], busbw: {}, jitter: {} };
        store.jobs.set(job.job, s);
      }
      s.meta = job;
      const before = s.t.length;
      for (let i = 0; i < job.t.length; i++) {
        s.t.push(job.t[i]);
        s.step.push(job.step[i]);
        s.step_seconds.push(job.step_seconds[i]);
        store.lastJobT = Math.max(store.lastJobT, job.t[i]);
      }
      // A series that appears later has nulls for the points before it.
      const add = (into, from) => {
        for (const [name, values] of Object.entries(from)) {
          if (!into[name]) into[name] = new Array(before).fill(null);
          into[name].push(...values);
        }
        for (const a of Object.values(into)) while (a.length < s.t.length) a.push(null);
      };
      add(s.busbw, job.busbw_bytes_per_second);
      add(s.jitter, job.kernel_jitter_ratio);
      trim(s, [s.t, s.step, s.step_seconds].concat(Object.values(s.busbw), Object.values(s.jitter)));
    }
    for (const name of Array.from(store.jobs.keys())) {
      if (!seen.has(name)) {
        store.jobs.delete(name);
        for (const id of Array.from(charts.keys())) {
          if (id.startsWith('job:' + name + ':')) {
            charts.get(id).plot.destroy();
            charts.delete(id);
            delete page.charts[id];
          }
        }
      }
    }
    page.jobs = store.jobs.size;
  }

  function drawJobs() {
    const container = $('jobs');
    $('jobs-empty').hidden = store.jobs.size > 0;
    const cards = new Map();
    for (const card of Array.from(container.children)) cards.set(card.dataset.job, card);
    for (const [name, s] of store.jobs) {
      let card = cards.get(name);
      if (!card) {
        card = el('div', { class: 'job', 'data-job': name });
        card.appendChild(el('h3'));
        const grid = el('div', { class: 'charts' });
        for (const kind of ['step', 'busbw', 'jitter']) grid.appendChild(el('div', { class: 'chart', 'data-kind': kind }));
        card.appendChild(grid);
        container.appendChild(card);
      }
      cards.delete(name);
      const m = s.meta;
      const h3 = card.querySelector('h3');
      h3.textContent = 'job ' + name + ' ';
      h3.appendChild(el('small', {}, m.ranks + ' of ' + m.world_size + ' ranks here · step ' +
        (m.last_step === null ? '-' : m.last_step) + ' · last heard ' + fmt(m.heartbeat_age_seconds, 1) +
        ' s ago' + (m.active ? '' : ' · stopped reporting')));
      const node = (kind) => card.querySelector('.chart[data-kind="' + kind + '"]');
      draw('job:' + name + ':step', node('step'), 'Step time (longest, any rank)', 's', s.t,
        [{ label: 'step time', values: s.step_seconds }], fmtSeconds);
      draw('job:' + name + ':busbw', node('busbw'), 'Bus bandwidth per collective (lowest, any rank)', 'GB/s', s.t,
        Object.entries(s.busbw).map(([op, v]) => ({ label: op, values: v })), fmtBandwidth);
      draw('job:' + name + ':jitter', node('jitter'), 'Kernel jitter: run / median (highest, any rank)', 'x', s.t,
        Object.entries(s.jitter).map(([k, v]) => ({ label: k, values: v })), (v) => fmt(v, 2));
    }
    for (const card of cards.values()) card.remove();
  }

  function addEvents(e) {
    const list = $('timeline');
    for (const ev of e.events) {
      store.lastEvent = Math.max(store.lastEvent, ev.seq);
      const li = el('li', { 'data-kind': ev.kind, 'data-device': String(ev.device), 'data-seq': String(ev.seq) });
      const when = new Date(ev.unix * 1000);
      li.appendChild(el('span', { class: 'time', title: ev.time }, when.toLocaleString()));
      li.appendChild(el('span', {}, ev.label));
      const kind = el('span');
      kind.appendChild(el('span', { class: 'badge ' + ev.severity }, ev.kind));
      li.appendChild(kind);
      const detail = el('span', {}, ev.detail + ' ');
      detail.appendChild(el('span', { class: 'source' },
        ev.source === 'device' ? '(device)' : ev.source === 'job' ? '(anxin run)' : '(agent)'));
      li.appendChild(detail);
      list.insertBefore(li, list.firstChild);
    }
    while (list.children.length > MAX_TIMELINE) list.lastChild.remove();
    page.events = list.children.length;
    $('events-empty').hidden = page.events > 0;
    $('events-count').textContent = page.events ? page.events + ' shown' +
      (e.dropped ? ', ' + e.dropped + ' older dropped by the agent' : '') : '';
  }

  function setStatus(state, text) {
    const s = $('status');
    s.dataset.state = state;
    s.textContent = text;
  }

  async function poll() {
    try {
      const [h, j, e] = await Promise.all([
        getJSON('api/v1/history?since=' + store.lastDeviceT),
        getJSON('api/v1/jobs?since=' + store.lastJobT),
        getJSON('api/v1/events?after=' + store.lastEvent),
      ]);
      mergeDevices(h);
      drawDevices();
      mergeJobs(j);
      drawJobs();
      addEvents(e);
      page.polls++;
      page.ready = true;
      document.documentElement.dataset.ready = 'true';
      setStatus('live', 'live · ' + (h.time ? new Date(h.time).toLocaleTimeString() : 'no sample yet'));
    } catch (err) {
      page.failures++;
      page.lastError = String(err);
      setStatus(page.ready ? 'stale' : 'down', 'cannot reach the agent: ' + err.message);
    }
    setTimeout(poll, Math.max(1, store.interval) * 1000);
  }

  window.addEventListener('resize', () => {
    for (const c of charts.values()) c.plot.setSize({ width: chartWidth(c.node), height: 200 });
  });

  poll();
})();
