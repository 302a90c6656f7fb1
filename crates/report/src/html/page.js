// udamon report html: draws the heatmap from the page's data, zooms and pans it, and tells
// what lies under the pointer. Plain canvas; no library, nothing loaded from anywhere.
"use strict";
(() => {
  const violations = [];
  document.addEventListener("securitypolicyviolation", (e) => violations.push(e.blockedURI));
  const data = JSON.parse(document.getElementById("udamon-data").textContent);

  // Numbers as udamon's text reports print them (udamon_report::human), rounding as Rust does:
  // exact decimal expansion, ties to even.
  function fixed(x, d) {
    const neg = x < 0;
    const exact = Math.abs(x).toFixed(Math.min(100, d + 70));
    const dot = exact.indexOf(".");
    const keep = exact.slice(0, dot + 1 + d).replace(".", "");
    const rest = exact.slice(dot + 1 + d);
    const first = rest.charCodeAt(0) - 48;
    const tail = /[1-9]/.test(rest.slice(1));
    const last = keep.charCodeAt(keep.length - 1) - 48;
    let up = first > 5 || (first === 5 && (tail || last % 2 === 1));
    let digits = keep.split("").map(Number);
    for (let i = digits.length - 1; up && i >= 0; i--) {
      digits[i] += 1;
      up = digits[i] === 10;
      if (up) digits[i] = 0;
    }
    if (up) digits.unshift(1);
    let s = digits.join("");
    if (d > 0) s = s.slice(0, s.length - d) + "." + s.slice(s.length - d);
    return (neg && /[1-9]/.test(s) ? "-" : "") + s;
  }
  function trimmed(v, d) {
    const s = fixed(v, d);
    return s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s;
  }
  function number(v) {
    const m = Math.abs(v);
    return trimmed(v, m >= 100 ? 0 : m >= 10 ? 1 : m >= 1 ? 2 : 3);
  }
  const UNITS = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  function size(b) {
    if (b < 1024) return b + " B";
    let v = b / 1024, u = 0;
    while (v >= 1024 && u + 1 < UNITS.length) { v /= 1024; u++; }
    return fixed(v, 3) + " " + UNITS[u];
  }
  function duration(ns) {
    const US = 1e3, MS = 1e6, S = 1e9;
    if (ns === 0) return "0 s";
    if (ns < US) return ns + " ns";
    if (ns < MS) return trimmed(ns / US, 3) + " us";
    if (ns < S) return trimmed(ns / MS, 3) + " ms";
    if (ns < 60 * S) return trimmed(ns / S, 3) + " s";
    const h = Math.floor(ns / (3600 * S)), m = Math.floor((ns % (3600 * S)) / (60 * S));
    const s = trimmed((ns % (60 * S)) / S, 3);
    return h > 0 ? `${h} h ${m} m ${s} s` : `${m} m ${s} s`;
  }
  const hex = (a) => "0x" + a.toString(16);

  function bytes(b64) {
    const s = atob(b64), out = new Uint8Array(s.length);
    for (let i = 0; i < s.length; i++) out[i] = s.charCodeAt(i);
    return out;
  }

  // A kept window's regions: [start, end, nr_accesses, age] each.
  const decoded = new Map();
  function regions(w) {
    if (decoded.has(w)) return decoded.get(w);
    const b = bytes(w.regions), out = [];
    let i = 0, end = 0;
    const varint = () => {
      let v = 0, scale = 1, c;
      do { c = b[i++]; v += (c & 0x7f) * scale; scale *= 128; } while (c & 0x80);
      return v;
    };
    while (i < b.length) {
      const start = end + varint(), sz = varint(), nr = varint(), age = varint();
      end = start + sz;
      out.push([start, end, nr, age]);
    }
    decoded.set(w, out);
    return out;
  }

  // What `report access --snapshot INDEX` prints of the region of window `w` holding `addr`.
  function describe(w, addr) {
    const rs = regions(w);
    let lo = 0, hi = rs.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1, r = rs[mid];
      if (addr < r[0]) hi = mid - 1;
      else if (addr >= r[1]) lo = mid + 1;
      else {
        const max = Math.max(1, Math.min(Math.floor(w.aggr_us / Math.max(1, w.sample_us)), 4294967295));
        const aggrS = Math.max(1, w.aggr_us) / 1e6;
        return {
          index: mid,
          range: hex(r[0]) + "-" + hex(r[1]),
          size: size(r[1] - r[0]),
          access: number((r[2] * 100) / max) + " %",
          hz: number(r[2] / aggrS) + " Hz",
          age: duration(r[3] * w.aggr_us * 1000),
        };
      }
    }
    return null;
  }

  // The heatmap.
  const canvas = document.getElementById("heat-canvas");
  const ctx = canvas.getContext("2d");
  const tooltip = document.getElementById("tooltip");
  const PAD = { left: 130, right: 20, top: 14, bottom: 44 };
  let T = null, image = null;
  let view = { x0: 0, x1: 1, y0: 0, y1: 1 }; // time (rows), address (cols) as fractions

  function colour(q) {
    const t = (q - 1) / 254, v = data.viridis, p = t * (v.length - 1);
    const i = Math.min(Math.floor(p), v.length - 2), f = p - i;
    return v[i].map((a, k) => Math.round(a + (v[i + 1][k] - a) * f));
  }
  function load(index) {
    T = data.targets[index];
    const h = T.heatmap, cells = bytes(h.cells);
    T.cellBytes = cells;
    // Time along x, addresses up y: the image is cols tall, rows wide.
    const off = document.createElement("canvas");
    off.width = h.rows;
    off.height = h.cols;
    const img = off.getContext("2d").createImageData(h.rows, h.cols);
    const lut = [];
    for (let q = 0; q < 256; q++) lut.push(q === 0 ? [255, 255, 255] : colour(q));
    for (let r = 0; r < h.rows; r++) {
      for (let c = 0; c < h.cols; c++) {
        const [R, G, B] = lut[cells[r * h.cols + c]];
        const o = ((h.cols - 1 - c) * h.rows + r) * 4;
        img.data[o] = R; img.data[o + 1] = G; img.data[o + 2] = B; img.data[o + 3] = 255;
      }
    }
    off.getContext("2d").putImageData(img, 0, 0);
    image = off;
    // Axis offsets of each segment, to turn offsets into addresses.
    let acc = 0;
    T.offsets = h.segments.map(([s, e]) => { const o = acc; acc += e - s; return o; });
    T.length = acc;
    view = { x0: 0, x1: 1, y0: 0, y1: 1 };
    draw();
  }
  function addressAt(offset) {
    const o = T.offsets, s = T.heatmap.segments;
    let i = 0;
    while (i + 1 < o.length && o[i + 1] <= offset) i++;
    return s[i][0] + Math.min(Math.round(offset - o[i]), s[i][1] - s[i][0]);
  }
  // The axis offset of an address, or null in a collapsed gap.
  function offsetOf(a) {
    const s = T.heatmap.segments;
    for (let i = 0; i < s.length; i++) if (a >= s[i][0] && a <= s[i][1]) return T.offsets[i] + (a - s[i][0]);
    return null;
  }
  function plot() {
    return {
      x: PAD.left, y: PAD.top,
      w: canvas.width - PAD.left - PAD.right, h: canvas.height - PAD.top - PAD.bottom,
    };
  }
  function draw() {
    const h = T.heatmap, p = plot();
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, canvas.width, canvas.height);
    const sx = view.x0 * h.rows, sw = (view.x1 - view.x0) * h.rows;
    const sy = (1 - view.y1) * h.cols, sh = (view.y1 - view.y0) * h.cols;
    // Sharp cells when magnified; averaged when more cells than pixels.
    ctx.imageSmoothingEnabled = sw > p.w || sh > p.h;
    ctx.drawImage(image, sx, sy, sw, sh, p.x, p.y, p.w, p.h);
    // Collapsed gaps.
    ctx.strokeStyle = "#fff";
    ctx.lineWidth = 2;
    for (const o of T.offsets.slice(1)) {
      const f = o / T.length;
      if (f <= view.y0 || f >= view.y1) continue;
      const y = p.y + p.h * (1 - (f - view.y0) / (view.y1 - view.y0));
      ctx.beginPath(); ctx.moveTo(p.x, y); ctx.lineTo(p.x + p.w, y); ctx.stroke();
    }
    // Axes.
    ctx.fillStyle = "#1d2330";
    ctx.font = "12px ui-monospace, monospace";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    // Address ticks at round addresses: multiples of a power of two, about six in view.
    const step = 2 ** Math.floor(Math.log2(Math.max(1, ((view.y1 - view.y0) * T.length) / 6)));
    let lastY = Infinity;
    for (let k = 0; k <= 12; k++) {
      const f = view.y0 + ((view.y1 - view.y0) * k) / 12;
      const a = Math.ceil(addressAt(f * T.length) / step) * step;
      const o = offsetOf(a);
      if (o === null || o / T.length > view.y1) continue;
      const y = p.y + p.h * (1 - (o / T.length - view.y0) / (view.y1 - view.y0));
      if (lastY - y < 30) continue;
      lastY = y;
      ctx.fillText(hex(a), p.x - 8, y);
      ctx.fillRect(p.x - 5, y, 5, 1);
    }
    ctx.textAlign = "center";
    ctx.textBaseline = "top";
    const span = h.end_ns - h.start_ns;
    for (let k = 0; k <= 8; k++) {
      const f = view.x0 + ((view.x1 - view.x0) * k) / 8;
      const x = p.x + (p.w * k) / 8;
      ctx.fillText(trimmed((h.start_ns + f * span) / 1e9, 3) + " s", x, p.y + p.h + 8);
      ctx.fillRect(x, p.y + p.h, 1, 5);
    }
    ctx.fillText("time", p.x + p.w / 2, p.y + p.h + 26);
    ctx.strokeStyle = "#1d2330";
    ctx.lineWidth = 1;
    ctx.strokeRect(p.x - 0.5, p.y - 0.5, p.w + 1, p.h + 1);
    document.getElementById("heat-view").textContent =
      `${trimmed((h.start_ns + view.x0 * span) / 1e9, 3)} s to ${trimmed((h.start_ns + view.x1 * span) / 1e9, 3)} s; ` +
      `${hex(addressAt(view.y0 * T.length))} to ${hex(addressAt(view.y1 * T.length))}; ` +
      `colour: 0 to ${number(h.max)} ${h.unit}`;
  }

  function clampView() {
    for (const [a, b] of [["x0", "x1"], ["y0", "y1"]]) {
      let w = Math.min(1, Math.max(view[b] - view[a], 1e-6));
      let lo = Math.min(Math.max(view[a], 0), 1 - w);
      view[a] = lo; view[b] = lo + w;
    }
  }
  // Zoom by `fx` in time and `fy` in address around the fractions (cx, cy) of the plot.
  function zoom(fx, fy, cx = 0.5, cy = 0.5) {
    const ax = view.x0 + (view.x1 - view.x0) * cx, ay = view.y0 + (view.y1 - view.y0) * cy;
    view = {
      x0: ax - (ax - view.x0) / fx, x1: ax + (view.x1 - ax) / fx,
      y0: ay - (ay - view.y0) / fy, y1: ay + (view.y1 - ay) / fy,
    };
    clampView();
    draw();
  }
  function at(ev) {
    const r = canvas.getBoundingClientRect(), p = plot();
    const x = ((ev.clientX - r.left) * canvas.width) / r.width;
    const y = ((ev.clientY - r.top) * canvas.height) / r.height;
    return { fx: (x - p.x) / p.w, fy: 1 - (y - p.y) / p.h, x, y };
  }
  canvas.addEventListener("wheel", (ev) => {
    ev.preventDefault();
    const a = at(ev), f = ev.deltaY < 0 ? 1.5 : 1 / 1.5;
    zoom(ev.shiftKey ? 1 : f, ev.altKey ? 1 : f, Math.min(1, Math.max(0, a.fx)), Math.min(1, Math.max(0, a.fy)));
  }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (ev) => { drag = { a: at(ev), v: { ...view } }; });
  window.addEventListener("mouseup", () => { drag = null; });
  canvas.addEventListener("dblclick", () => { view = { x0: 0, x1: 1, y0: 0, y1: 1 }; draw(); });
  canvas.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  canvas.addEventListener("mousemove", (ev) => {
    const a = at(ev);
    if (drag) {
      const dx = (a.fx - drag.a.fx) * (drag.v.x1 - drag.v.x0), dy = (a.fy - drag.a.fy) * (drag.v.y1 - drag.v.y0);
      view = { x0: drag.v.x0 - dx, x1: drag.v.x1 - dx, y0: drag.v.y0 - dy, y1: drag.v.y1 - dy };
      clampView();
      draw();
      return;
    }
    if (a.fx < 0 || a.fx > 1 || a.fy < 0 || a.fy > 1) { tooltip.hidden = true; return; }
    tooltip.textContent = hover(view.x0 + (view.x1 - view.x0) * a.fx, view.y0 + (view.y1 - view.y0) * a.fy);
    tooltip.hidden = false;
    const r = canvas.getBoundingClientRect();
    tooltip.style.left = Math.min(ev.clientX - r.left + 14, r.width - 360) + "px";
    tooltip.style.top = ev.clientY - r.top + 14 + "px";
  });

  // What lies at time fraction fx and address fraction fy.
  function hover(fx, fy) {
    const h = T.heatmap;
    const t = h.start_ns + fx * (h.end_ns - h.start_ns), offset = fy * T.length;
    const addr = addressAt(offset);
    const cell = T.cellBytes[Math.min(h.rows - 1, Math.floor(fx * h.rows)) * h.cols + Math.min(h.cols - 1, Math.floor(fy * h.cols))];
    const lines = [`${trimmed(t / 1e9, 3)} s, ${hex(addr)}`];
    lines.push(cell === 0 ? "not monitored" : `cell: about ${number(((cell - 1) / 254) * h.max)} ${h.unit}`);
    let w = null;
    for (const k of T.windows) if (!w || Math.abs((k.start_ns + k.end_ns) / 2 - t) < Math.abs((w.start_ns + w.end_ns) / 2 - t)) w = k;
    const r = w && describe(w, addr);
    if (r) {
      lines.push(`window ${w.index} (${duration(w.start_ns)} - ${duration(w.end_ns)}): region ${r.range}`);
      lines.push(`  ${r.size}, access ${r.access} (${r.hz}), age ${r.age}`);
    }
    const m = h.mappings.find(([, from, to]) => offset >= from && offset < to);
    if (m) {
      lines.push(`mapping ${m[0]}`);
      const f = data.functions.find((x) => x.mapping === m[0]);
      if (f) {
        lines.push(`functions touching it (${f.samples} samples):`);
        for (const [share, name] of f.functions) lines.push(`  ${share} ${name}`);
      }
    }
    return lines.join("\n");
  }

  const select = document.getElementById("heat-target");
  select.addEventListener("change", () => load(Number(select.value)));
  document.getElementById("zoom-in").onclick = () => zoom(2, 2);
  document.getElementById("zoom-out").onclick = () => zoom(0.5, 0.5);
  document.getElementById("time-in").onclick = () => zoom(2, 1);
  document.getElementById("time-out").onclick = () => zoom(0.5, 1);
  document.getElementById("reset").onclick = () => { view = { x0: 0, x1: 1, y0: 0, y1: 1 }; draw(); };
  new ResizeObserver(() => {
    const w = Math.round(canvas.clientWidth * (window.devicePixelRatio || 1));
    if (w > 0 && w !== canvas.width) { canvas.width = w; canvas.height = Math.round(520 * (window.devicePixelRatio || 1)); draw(); }
  }).observe(canvas);
  load(0);

  // `#selftest`: what the tests check, written into the page for a headless browser to dump.
  if (location.hash === "#selftest") {
    const p = plot();
    const pixels = () => ctx.getImageData(p.x, p.y, p.w, p.h).data;
    const fingerprint = (d) => { let h = 0; for (let i = 0; i < d.length; i += 7) h = (h * 31 + d[i]) | 0; return h; };
    const colours = new Set();
    const d0 = pixels();
    for (let i = 0; i < d0.length; i += 4 * 97) colours.add((d0[i] << 16) | (d0[i + 1] << 8) | d0[i + 2]);
    const before = fingerprint(d0);
    const r = canvas.getBoundingClientRect();
    canvas.dispatchEvent(new WheelEvent("wheel", { deltaY: -300, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2, bubbles: true, cancelable: true }));
    const after = fingerprint(pixels());
    const w = T.windows[Math.floor(T.windows.length / 2)];
    const described = regions(w).map(([start]) => describe(w, start));
    document.getElementById("selftest").textContent = JSON.stringify({
      drawn_ms: performance.now(),
      panels: [...document.querySelectorAll("section[id]")].map((s) => s.id),
      colours: colours.size,
      zoom_changed: before !== after,
      view,
      resources: performance.getEntriesByType("resource").length,
      violations,
      window: w.index,
      target: T.target,
      described,
      // Tables wider than their box: the reader would have to scroll sideways to see them.
      clipped: [...document.querySelectorAll("div.scroll")]
        .filter((d) => d.scrollWidth > d.clientWidth + 1)
        .map((d) => d.firstElementChild.className),
    });
  }
})();
