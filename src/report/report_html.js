/* report_html.js - draws the cumemtrace report embedded in this page.
 *
 * The JSON report (docs/report.schema.json) sits in the element
 * #report-data; this script reads it and builds the page: the findings
 * (what the text report opens with), summary cards, live bytes over time per device and kind, an icicle of live memory by
 * stack at one moment, and the tables, the growing sites first. Plain DOM and SVG, no library,
 * nothing fetched.
 *
 * What a reader can do: switch kinds of memory on and off (the legend),
 * hover the chart to see the top sites at that moment, click it to see the
 * icicle at that moment or drag across it to see the highest point of that
 * range (the icicle at a moment is rebuilt from the event timeline: live at
 * the start of the timeline plus every change up to that moment, stack by
 * stack, replayed from the nearest of a few hundred checkpoints), click a
 * frame of the icicle to zoom into it, search frames by name, and show the
 * frames the report hides (start-up, interpreter, frameworks; the JSON marks
 * them, src/report/frames.h).
 *
 * A framework's cache whose blocks are recorded (caches[].view "blocks":
 * PyTorch's tensors) is counted once everywhere: its segments
 * (stacks[].cache_segment) hold its blocks, so the icicle, its highest
 * point, the leaked and largest-holder tables count the blocks by their
 * lines, and the segments only as what the blocks leave unused (a toggle,
 * off at first) and in a table of their own. What a Python program held
 * at its end (program_end, held_at_end, live[].held_at_end) is listed in a
 * neutral colour, not as leaked.
 *
 * For tests and tools: script errors are counted in the body's
 * data-script-errors attribute (and listed in #errors); data-rendered="1"
 * says the page was drawn; every summary figure carries its exact value in a
 * data-value attribute; #icicle carries data-total, data-moment, data-focus
 * and data-search-bytes. Compiled into the library by scripts/embed.cmake. */
'use strict';

(function () {
  var errorCount = 0;
  document.body.setAttribute('data-script-errors', '0');

  function recordError(message) {
    errorCount += 1;
    document.body.setAttribute('data-script-errors', String(errorCount));
    var box = document.getElementById('errors');
    if (!box) {
      box = document.createElement('pre');
      box.id = 'errors';
      document.body.insertBefore(box, document.body.firstChild);
    }
    box.textContent += String(message) + '\n';
  }
  window.onerror = function (message, source, line, column, error) {
    recordError(message + ' (line ' + line + ')' + (error && error.stack ? '\n' + error.stack : ''));
  };

  /* Kinds whose bytes occupy device memory (src/record/kinds.c); the VMM
   * mappings and reservations are address space, off at first. */
  var DEVICE_MEMORY_KINDS = { device: true, stream_ordered: true, vmm_physical: true, array: true };
  var ADDRESS_SPACE_KINDS = { vmm_mapping: true, vmm_reservation: true };
  var TOTAL = 'all device memory';
  /* A framework's cache where its blocks are recorded: its segments hold
   * the blocks, which have lines of their own; what the blocks leave unused
   * is one more entry, off at first (as the folded export's). */
  var SEGMENTS = 'unused in caches';
  var CACHE_KINDS = { torch_tensor: 'PyTorch', cupy_block: 'CuPy', jax_array: 'JAX' };
  var KIND_COLORS = {
    device: '#1e88e5', stream_ordered: '#43a047', managed: '#fb8c00', pinned_host: '#8e24aa',
    registered_host: '#6d4c41', vmm_physical: '#00897b', vmm_mapping: '#90a4ae',
    vmm_reservation: '#b0bec5', array: '#f4511e', torch_tensor: '#f9a825', cupy_block: '#3949ab',
    jax_array: '#00acc1'
  };
  KIND_COLORS[TOTAL] = '#263238';

  function offAtFirst(kind) {
    return ADDRESS_SPACE_KINDS[kind] || kind === SEGMENTS;
  }

  /* ---- small helpers ------------------------------------------------- */

  function element(tag, attributes, children) {
    var node = document.createElement(tag);
    var name;
    for (name in attributes || {}) {
      node.setAttribute(name, attributes[name]);
    }
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === 'string' ? document.createTextNode(child) : child);
    });
    return node;
  }

  function svgElement(tag, attributes, text) {
    var node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    var name;
    for (name in attributes || {}) {
      node.setAttribute(name, attributes[name]);
    }
    if (text !== undefined) {
      node.textContent = text;
    }
    return node;
  }

  function clear(node) {
    while (node.firstChild) {
      node.removeChild(node.firstChild);
    }
    return node;
  }

  /* "1.50 GiB", as src/report/output.c's format_bytes. */
  function formatBytes(bytes) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    var value = Math.abs(bytes);
    var unit = 0;
    while (value >= 1024 && unit < 4) {
      value /= 1024;
      unit += 1;
    }
    var sign = bytes < 0 ? '-' : '';
    if (unit === 0) {
      return sign + value + ' B';
    }
    return sign + value.toFixed(value < 10 ? 2 : value < 100 ? 1 : 0) + ' ' + units[unit];
  }

  function formatSeconds(us) {
    var s = us / 1e6;
    return (s < 10 ? s.toFixed(s < 1 ? 3 : 2) : s < 100 ? s.toFixed(1) : s.toFixed(0)) + ' s';
  }

  function basename(path) {
    return path ? path.slice(path.lastIndexOf('/') + 1) : '';
  }

  function deviceName(device) {
    return device === null || device === undefined ? 'no device' : 'device ' + device;
  }

  /* ---- rounded axis ticks ---------------------------------------------- */

  /* A step of 1, 2, 2.5 or 5 times a power of ten, giving about `count`
   * steps over `range`; and the decimals its labels need, so that no two
   * labels read the same. */
  function niceStep(range, count) {
    var raw = range / Math.max(1, count);
    var power = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var factors = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < factors.length; i++) {
      if (factors[i] * power >= raw * 0.999) {
        return factors[i] * power;
      }
    }
    return 10 * power;
  }

  function decimalsOf(step) {
    var decimals = 0;
    while (decimals < 6 && Math.abs(Math.round(step * Math.pow(10, decimals)) - step * Math.pow(10, decimals)) > 1e-9) {
      decimals += 1;
    }
    return decimals;
  }

  /* Byte ticks in one binary unit (0, 50, 100, 150 MiB); `top` is the
   * axis' top, a whole number of steps at or above `max`. */
  function byteTicks(max) {
    var units = [['B', 1], ['KiB', 1024], ['MiB', 1048576], ['GiB', 1073741824], ['TiB', 1099511627776]];
    var unit = units[0];
    units.forEach(function (u) {
      if (max >= u[1]) {
        unit = u;
      }
    });
    var step = niceStep(max / unit[1], 4);
    if (unit[0] === 'B') {
      step = Math.max(1, Math.round(step));
    }
    var decimals = decimalsOf(step);
    var top = Math.max(step, Math.ceil(max / unit[1] / step - 1e-9) * step);
    var ticks = [];
    for (var k = 0; k * step <= top + step * 1e-6; k++) {
      ticks.push({ value: k * step * unit[1], label: (k * step).toFixed(decimals) + ' ' + unit[0] });
    }
    return { ticks: ticks, top: top * unit[1] };
  }

  /* Time ticks (microseconds) in ms below 2 s, else in s. */
  function timeTicks(end) {
    var unit = end < 2e6 ? [1e3, 'ms'] : [1e6, 's'];
    var step = niceStep(end / unit[0], 5);
    var decimals = decimalsOf(step);
    var ticks = [];
    for (var k = 0; k * step * unit[0] <= end * (1 + 1e-9); k++) {
      ticks.push({ value: k * step * unit[0], label: (k * step).toFixed(decimals) + ' ' + unit[1] });
    }
    return ticks;
  }

  /* ---- the report's stacks ------------------------------------------ */

  function Stacks(report) {
    var frames = report.frames || [];
    var byId = {};
    (report.stacks || []).forEach(function (stack) {
      byId[stack.id] = stack;
    });

    /* As src/report/frames.c's frames_name, the file shortened. */
    function label(id) {
      var f = frames[id];
      if (!f) {
        return '?';
      }
      if (f.python && !f.line) {
        return f.function || '?';         /* a marker frame: no place in code */
      }
      if (f.python) {
        return (f.function || '?') + ' (' + basename(f.file) + ':' + f.line + ')';
      }
      if (f.function) {
        return f.function;
      }
      if (f.module) {
        return basename(f.module) + '+0x' + Number(f.module_offset || 0).toString(16);
      }
      return f.address || '?';
    }

    function detailLine(id) {
      var f = frames[id];
      if (!f) {
        return '?';
      }
      if (f.python) {
        return (f.function || '?') + '  ' + f.file + ':' + f.line;
      }
      var where = f.file ? f.file + ':' + f.line : '';
      var module = f.module ? basename(f.module) + '+0x' + Number(f.module_offset || 0).toString(16) : '';
      return (f.function || module || f.address) + (where ? '  ' + where : '') +
        (f.function && module ? '  [' + module + ']' : '');
    }

    /* A marker frame (python.h: line 0) is a placeholder, never a frame:
     * a thread that runs no Python borrows the main thread's frames after it. */
    function marker(id) {
      var f = frames[id];
      return !!f && f.python && !f.line;
    }

    function shown(stack, allFrames) {
      var hidden = {};
      if (!allFrames) {
        (stack.hidden || []).forEach(function (i) {
          hidden[i] = true;
        });
      }
      return stack.frames.filter(function (id, i) {
        return !hidden[i] && !marker(id);
      });
    }

    return {
      stack: function (stackId) {
        return byId[stackId];
      },
      /* Outermost first, for the icicle. */
      path: function (stackId, allFrames) {
        var stack = byId[stackId];
        if (!stack) {
          return ['[stack ' + stackId + ' not in the report]'];
        }
        if (stack.frames.length === 0) {
          return ['[no stack]'];
        }
        return shown(stack, allFrames).map(label).reverse();
      },
      /* The stack's site: its innermost frame in the program's own code, in
       * the words of every report (site_text: its callers, the packages its
       * call went through), the file by its base name; older reports have
       * only the frame. */
      site: function (stackId) {
        var stack = byId[stackId];
        if (!stack || stack.frames.length === 0) {
          return stack ? '[no stack]' : '[stack ' + stackId + ' not in the report]';
        }
        var f = frames[stack.frames[stack.site === null || stack.site === undefined ? 0 : stack.site]];
        if (stack.site_text) {
          var file = f && f.file ? f.file + ':' : null;
          return file && stack.site_text.indexOf(file) === 0
            ? basename(f.file) + stack.site_text.slice(f.file.length) : stack.site_text;
        }
        if (f && f.file && (f.python || f.function)) {
          return basename(f.file) + ':' + f.line + ' in ' + f.function;
        }
        return label(stack.frames[stack.site || 0]);
      },
      detail: function (stackId, allFrames) {
        var stack = byId[stackId];
        if (!stack) {
          return '(no stack recorded)';
        }
        var kept = shown(stack, allFrames);
        var lines = [];
        var markers = 0;
        stack.frames.forEach(function (id) {
          if (marker(id)) {
            markers++;
            lines.push('-- this thread runs no Python; the main thread\'s frames at that moment:');
          } else if (kept.indexOf(id) >= 0) {
            lines.push(detailLine(id));
          }
        });
        var hidden = stack.frames.length - kept.length - markers;
        if (hidden) {
          lines.push('(' + hidden + ' frame' + (hidden === 1 ? '' : 's') +
            ' hidden: start-up, interpreter, frameworks; "all frames" shows them)');
        }
        return lines.join('\n');
      },
      matches: function (stackId, query, allFrames) {
        var stack = byId[stackId];
        return !!stack && shown(stack, allFrames).some(function (id) {
          return label(id).toLowerCase().indexOf(query) >= 0;
        });
      }
    };
  }

  /* ---- the timeline, replayed -------------------------------------------- */

  function delta(e) {
    return e[1] === 'alloc' ? e[3] : e[1] === 'free' || e[1] === 'free_implicit' ? -e[3] : 0;
  }

  /* Live bytes per (kind, stack) after any event: the state at the start
   * of the timeline is the end (the live groups) minus every change; from
   * it, checkpoints every few events, so that any moment is one checkpoint
   * and a short replay away. */
  function Replay(report) {
    var events = report.timeline.events;
    var index = {};
    var kinds = [];
    var stacks = [];
    function key(kind, stack) {
      var k = kind + '|' + stack;
      if (index[k] === undefined) {
        index[k] = kinds.length;
        kinds.push(kind);
        stacks.push(stack);
      }
      return index[k];
    }
    var endBytes = {};
    (report.live || []).forEach(function (g) {
      var k = key(g.kind, g.stack);
      endBytes[k] = (endBytes[k] || 0) + g.bytes;
    });
    var keys = events.map(function (e) {
      return delta(e) ? key(e[5], e[6]) : -1;
    });
    var start = new Float64Array(kinds.length);
    Object.keys(endBytes).forEach(function (k) {
      start[k] = endBytes[k];
    });
    events.forEach(function (e, i) {
      if (keys[i] >= 0) {
        start[keys[i]] -= delta(e);
      }
    });
    var checkpointCount = Math.max(1, Math.min(256, Math.floor(4e6 / Math.max(1, kinds.length))));
    var every = Math.max(1, Math.ceil(events.length / checkpointCount));
    var checkpoints = [start];
    var state = new Float64Array(start);
    events.forEach(function (e, i) {
      if (keys[i] >= 0) {
        state[keys[i]] += delta(e);
      }
      if ((i + 1) % every === 0) {
        checkpoints.push(new Float64Array(state));
      }
    });
    return {
      kinds: kinds,
      stacks: stacks,
      events: events,
      /* The state after event i (i = -1: before the first). */
      after: function (i) {
        var k = Math.floor((i + 1) / every);
        var s = new Float64Array(checkpoints[k]);
        for (var j = k * every; j <= i; j++) {
          if (keys[j] >= 0) {
            s[keys[j]] += delta(events[j]);
          }
        }
        return s;
      },
      /* The last event at or before `time`; -1 before the first. */
      indexAt: function (time) {
        var low = 0;
        var high = events.length;
        while (low < high) {
          var mid = (low + high) >> 1;
          if (events[mid][0] <= time) {
            low = mid + 1;
          } else {
            high = mid;
          }
        }
        return low - 1;
      }
    };
  }

  /* What `bytes` of `kind` from `stack` add to what the page shows: a cache
   * segment's nothing but, with SEGMENTS on, to its cache's unused rest; a
   * block of a cache whose blocks are known its own bytes, and as much less
   * of that unused rest. */
  function shownBytes(page, kind, stack, bytes) {
    var on = page.state.on;
    if (page.segments[stack]) {
      return on[SEGMENTS] ? bytes : 0;
    }
    return (on[kind] ? bytes : 0) - (page.blocksKnown[kind] && on[SEGMENTS] ? bytes : 0);
  }

  /* Live bytes of what the page shows (all devices) after each event and
   * before the first: what "the highest point" means. */
  function totals(page) {
    var events = page.report.timeline.events;
    var now = 0;
    (page.report.live || []).forEach(function (g) {
      now += shownBytes(page, g.kind, g.stack, g.bytes);
    });
    events.forEach(function (e) {
      now -= shownBytes(page, e[5], e[6], delta(e));
    });
    var after = new Float64Array(events.length);
    var before = now;
    events.forEach(function (e, i) {
      now += shownBytes(page, e[5], e[6], delta(e));
      after[i] = now;
    });
    return { before: before, after: after };
  }

  /* The highest point of `on` kinds among events [from, to]: its index. */
  function highest(sums, from, to) {
    var best = from - 1;
    var bytes = from > 0 ? sums.after[from - 1] : sums.before;
    for (var i = Math.max(0, from); i <= to; i++) {
      if (sums.after[i] > bytes) {
        bytes = sums.after[i];
        best = i;
      }
    }
    return { index: best, bytes: bytes };
  }

  /* ---- memory over time ---------------------------------------------- */

  function counterBytes(report, device, kind) {
    var devices = report.devices || [];
    for (var i = 0; i < devices.length; i++) {
      if (devices[i].device === device) {
        var c = devices[i].counters[kind === TOTAL ? 'device_memory' : kind];
        return c ? c.allocated_bytes.current : 0;
      }
    }
    return 0;
  }

  /* A device's total is drawn only when it sums several kinds: with one,
   * it would lie on that kind's line. */
  function summedDevices(report) {
    var summed = {};
    (report.devices || []).forEach(function (d) {
      var kinds = Object.keys(d.counters).filter(function (kind) {
        return DEVICE_MEMORY_KINDS[kind] && d.counters[kind].allocation.allocated > 0;
      });
      summed[d.device] = kinds.length > 1;
    });
    return summed;
  }

  /* Step series per device and kind from the timeline. */
  function buildSeries(report) {
    var events = report.timeline.events;
    var summed = summedDevices(report);
    var series = {};
    var order = [];
    function ensure(device, kind) {
      var k = deviceName(device) + ': ' + kind;
      if (!series[k]) {
        series[k] = { name: k, device: device, kind: kind, start: counterBytes(report, device, kind), points: [] };
        order.push(k);
      }
      return series[k];
    }
    events.forEach(function (e) {
      var d = delta(e);
      if (d) {
        ensure(e[4], e[5]).start -= d;
        if (DEVICE_MEMORY_KINDS[e[5]] && summed[e[4]]) {
          ensure(e[4], TOTAL).start -= d;
        }
      }
    });
    var first = events.length ? events[0][0] : 0;
    order.forEach(function (k) {
      series[k].points.push([first, series[k].start]);
      series[k].value = series[k].start;
    });
    events.forEach(function (e) {
      var d = delta(e);
      if (!d) {
        return;
      }
      var s = series[deviceName(e[4]) + ': ' + e[5]];
      s.value += d;
      s.points.push([e[0], s.value]);
      if (DEVICE_MEMORY_KINDS[e[5]] && summed[e[4]]) {
        var total = series[deviceName(e[4]) + ': ' + TOTAL];
        total.value += d;
        total.points.push([e[0], total.value]);
      }
    });
    var end = Math.max(first, Math.round(report.process.duration_s * 1e6));
    if (events.length && events[events.length - 1][0] > end) {
      end = events[events.length - 1][0];
    }
    order.forEach(function (k) {
      series[k].points.push([end, series[k].value]);
    });
    return { list: order.map(function (k) { return series[k]; }), end: end };
  }

  /* Without the timeline: the coarse series (growth samples), ending at the
   * counters; or, without it too, the marks' device bytes. */
  function seriesFromSamples(report) {
    var endUs = Math.round(report.process.duration_s * 1e6);
    var summed = summedDevices(report);
    var list = [];
    var totals = {};
    if (report.series) {
      report.series.tracks.forEach(function (track) {
        var points = track.points.map(function (p) {
          return [p[0] * 1000, p[1]];
        });
        points.push([endUs, counterBytes(report, track.device, track.kind)]);
        list.push({ name: deviceName(track.device) + ': ' + track.kind, device: track.device, kind: track.kind, points: points });
        if (DEVICE_MEMORY_KINDS[track.kind] && summed[track.device]) {
          if (!totals[track.device]) {
            totals[track.device] = points.map(function (p) {
              return [p[0], 0];
            });
          }
          points.forEach(function (p, i) {
            totals[track.device][i][1] += p[1];
          });
        }
      });
      Object.keys(totals).forEach(function (device) {
        list.push({ name: deviceName(Number(device)) + ': ' + TOTAL, device: Number(device), kind: TOTAL, points: totals[device] });
      });
    } else {
      var points = ((report.marks || {}).recent || []).map(function (m) {
        return [m.time_ms * 1000, m.device_bytes];
      });
      var now = 0;
      (report.devices || []).forEach(function (d) {
        now += d.counters.device_memory.allocated_bytes.current;
      });
      points.push([endUs, now]);
      list.push({ name: 'all device memory, all devices (at marks and at the end)', kind: TOTAL, points: points });
    }
    return { list: list, end: endUs };
  }

  /* ---- the page's state and its parts ------------------------------------ */

  function Page(report) {
    var stacks = Stacks(report);
    var replay = report.timeline && report.timeline.events.length ? Replay(report) : null;
    var present = {};
    (report.devices || []).forEach(function (d) {
      Object.keys(d.counters).forEach(function (kind) {
        if (kind !== 'device_memory' && d.counters[kind].allocation.allocated > 0) {
          present[kind] = true;
        }
      });
    });
    var state = {
      on: {},                 /* kinds shown: chart lines and icicle */
      allFrames: !!(report.tracer || {}).all_frames,
      search: '',
      zoom: [],               /* the focus: names from the root down */
      moment: null            /* {kind: 'end'|'peak'|'event'|'site-peaks', index, label} */
    };
    Object.keys(present).forEach(function (kind) {
      state.on[kind] = !offAtFirst(kind);
    });
    state.on[TOTAL] = true;
    /* A framework's cache segments, where its own blocks are recorded (its
     * caches[].view is "blocks"): the blocks say who holds the memory, so
     * the segments, which would count it twice, are never drawn as such;
     * SEGMENTS adds what the blocks leave of them unused. */
    var blocksKnown = {};
    (report.caches || []).forEach(function (c) {
      if (c.view === 'blocks') {
        blocksKnown[c.kind] = true;
      }
    });
    var segments = {};
    (report.stacks || []).forEach(function (s) {
      if (s.cache_segment && blocksKnown[s.cache_segment]) {
        segments[s.id] = s.cache_segment;
        present[SEGMENTS] = true;
      }
    });
    state.on[SEGMENTS] = false;
    /* Held when the program ended (a Python program: report.program_end):
     * not leaked, whether the interpreter's teardown freed it or not. */
    var held = report.program_end ? report.held_at_end || [] : [];
    var sums = null;
    function currentSums() {
      if (!sums && replay) {
        sums = totals(page);
      }
      return sums;
    }
    var redraws = [];
    var page = { report: report, stacks: stacks, replay: replay, present: present, state: state,
      segments: segments, blocksKnown: blocksKnown, held: held, sums: currentSums,
      redraws: redraws, hashMoment: null };
    page.changed = function (what) {
      if (what === 'kinds') {
        sums = null;
      }
      redraws.forEach(function (redraw) {
        redraw(what);
      });
      writeHash(page);
    };
    readHash(page);
    return page;
  }

  /* The memory live at a moment, as {stack, kind, bytes} for the kinds
   * shown; with SEGMENTS on, each cache's unused rest as {path, kind, bytes}
   * (its segments' bytes less its blocks', as the folded export names it). */
  function entriesAt(page, moment) {
    var report = page.report;
    var on = page.state.on;
    var list = [];
    var unused = {};
    function add(kind, stack, bytes) {
      var cache = page.segments[stack];
      if (cache || page.blocksKnown[kind]) {
        cache = cache || kind;
        unused[cache] = unused[cache] || { bytes: 0, kind: 'device' };
        unused[cache].bytes += cache === kind ? -bytes : bytes;
        if (cache !== kind) {
          unused[cache].kind = kind;
        }
      }
      if (!page.segments[stack] && on[kind] && bytes > 0) {
        list.push({ stack: stack, kind: kind, bytes: bytes });
      }
    }
    if (moment.kind === 'end') {
      (report.live || []).forEach(function (g) {
        add(g.kind, g.stack, g.bytes);
      });
    } else if (moment.kind === 'program-end') {
      page.held.forEach(function (g) {
        add(g.kind, g.stack, g.bytes);
      });
    } else if (moment.kind === 'site-peaks') {
      /* sites at their own highest: no moment at which a cache's rest is known */
      (report.stacks || []).forEach(function (s) {
        if (on[s.kind || 'device'] && !page.segments[s.id]) {
          list.push({ stack: s.id, kind: s.kind || 'device', bytes: s.peak_live_bytes });
        }
      });
    } else {
      var state = page.replay.after(moment.index);
      for (var k = 0; k < state.length; k++) {
        if (state[k] > 0) {
          add(page.replay.kinds[k], page.replay.stacks[k], state[k]);
        }
      }
    }
    Object.keys(unused).forEach(function (cache) {
      if (on[SEGMENTS] && unused[cache].bytes > 0) {
        list.push({ path: ['[' + cache + ' cache: reserved, unused]'], kind: unused[cache].kind,
          bytes: unused[cache].bytes });
      }
    });
    return list;
  }

  /* The top sites of a list of entries: [site, bytes], most first. */
  function topSites(page, entries, count) {
    var bySite = {};
    entries.forEach(function (e) {
      var site = e.path ? e.path[0] : page.stacks.site(e.stack);
      bySite[site] = (bySite[site] || 0) + e.bytes;
    });
    return Object.keys(bySite).map(function (site) {
      return [site, bySite[site]];
    }).sort(function (a, b) {
      return b[1] - a[1];
    }).slice(0, count);
  }

  /* Moments the icicle can show; `hash` names each in the address. */
  function peakMoment(page) {
    var best = highest(page.sums(), 0, page.replay.events.length - 1);
    return { kind: 'peak', index: best.index, hash: 'peak',
      label: 'at the highest point of the timeline (' +
        formatSeconds(best.index >= 0 ? page.replay.events[best.index][0] : 0) + ')' };
  }

  function endMoment(page) {
    var reason = page.report.reason;
    return { kind: 'end', hash: 'end',
      label: reason === 'exit' ? 'at the end of the run'
        : reason === 'oom' ? 'at the out-of-memory failure' : 'when the report was written' };
  }

  /* A Python program's end (program_end), where the text report's story
   * is: what it held then, not the little its teardown left. From the
   * timeline where it reaches that moment, else from held_at_end. */
  function programEndMoment(page) {
    var end = page.report.program_end;
    var label = 'held when the program ended (' + formatSeconds(end.time_ms * 1000) + '; not leaked)';
    if (page.replay && typeof end.timeline_index === 'number' && end.timeline_index > 0 &&
        end.timeline_index <= page.replay.events.length) {
      return { kind: 'event', index: end.timeline_index - 1, hash: 'program-end', label: label };
    }
    return { kind: 'program-end', hash: 'program-end', label: label };
  }

  /* An exit report's last OOM (failures.last_oom), on the timeline. */
  function oomMoment(page) {
    var oom = (page.report.failures || {}).last_oom;
    var time = oom.time_ms * 1000;
    return { kind: 'event', index: page.replay.indexAt(time), hash: 'oom',
      label: 'at the out-of-memory failure (' + formatSeconds(time) + ')' };
  }

  /* The moment the text report leads with: an OOM's (the OOM report's
   * own, or an exit report's last on the timeline), else a Python
   * program's end, else the highest point (the end without a timeline). */
  function leadingMoment(page) {
    var report = page.report;
    var first = (report.findings || [])[0] || {};
    if (report.reason === 'oom') {
      return endMoment(page);
    }
    if (first.verdict === 'oom' && page.replay && (report.failures || {}).last_oom) {
      return oomMoment(page);
    }
    if (report.program_end && page.held.length) {
      return programEndMoment(page);
    }
    return namedMoment(page, page.replay ? 'peak' : 'end');
  }

  function sitePeaksMoment() {
    return { kind: 'site-peaks', hash: 'site-peaks',
      label: 'each allocation site at its own highest (sites did not necessarily peak together; no timeline recorded)' };
  }

  /* A click on the chart at `time` (microseconds). */
  function timeMoment(page, time) {
    return { kind: 'event', index: page.replay.indexAt(time), hash: 't:' + Math.round(time),
      label: 'at ' + formatSeconds(time) + ' (clicked on the chart)' };
  }

  /* A range dragged across the chart: its highest point. */
  function rangeMoment(page, t0, t1) {
    var best = highest(page.sums(), page.replay.indexAt(t0) + 1, page.replay.indexAt(t1));
    return { kind: 'event', index: best.index, range: [t0, t1], hash: 'range:' + Math.round(t0) + '-' + Math.round(t1),
      label: 'at the highest point between ' + formatSeconds(t0) + ' and ' + formatSeconds(t1) +
        (best.index >= 0 ? ' (' + formatSeconds(page.replay.events[best.index][0]) + ')' : '') };
  }

  /* A moment from its hash name; null if it names none this page has. */
  function namedMoment(page, name) {
    var numbers = (name || '').split(/[:-]/).slice(1).map(Number);
    if (name === 'end') {
      return endMoment(page);
    }
    if (name === 'program-end') {
      return page.report.program_end && page.held.length ? programEndMoment(page) : null;
    }
    if (name === 'oom') {
      return page.replay && (page.report.failures || {}).last_oom ? oomMoment(page) : null;
    }
    if (!page.replay) {
      return name === 'site-peaks' ? sitePeaksMoment() : null;
    }
    if (name === 'peak') {
      return peakMoment(page);
    }
    if (/^t:\d+$/.test(name)) {
      return timeMoment(page, numbers[0]);
    }
    if (/^range:\d+-\d+$/.test(name)) {
      return rangeMoment(page, numbers[0], numbers[1]);
    }
    return null;
  }

  /* The view in the page's address: #moment=peak&zoom=main/train_step&
   * search=alloc&all=1&off=device, so that a link shows what its sender
   * saw (and the screenshots in docs/ are made from such links). */
  function readHash(page) {
    (window.location.hash || '').replace(/^#/, '').split('&').forEach(function (pair) {
      var at = pair.indexOf('=');
      var key = pair.slice(0, at);
      var raw = pair.slice(at + 1);
      if (at < 0) {
        return;
      }
      if (key === 'zoom') {
        page.state.zoom = raw ? raw.split('/').map(decodeURIComponent) : [];
      } else if (key === 'search') {
        page.state.search = decodeURIComponent(raw).trim().toLowerCase();
      } else if (key === 'all') {
        page.state.allFrames = raw === '1';
      } else if (key === 'off' || key === 'on') {
        raw.split(',').map(decodeURIComponent).forEach(function (kind) {
          page.state.on[kind] = key === 'on';
        });
      } else if (key === 'moment') {
        page.hashMoment = decodeURIComponent(raw);
      }
    });
  }

  function writeHash(page) {
    var state = page.state;
    var parts = ['moment=' + state.moment.hash];
    if (state.zoom.length) {
      parts.push('zoom=' + state.zoom.map(encodeURIComponent).join('/'));
    }
    if (state.search) {
      parts.push('search=' + encodeURIComponent(state.search));
    }
    if (state.allFrames !== !!(page.report.tracer || {}).all_frames) {
      parts.push('all=' + (state.allFrames ? '1' : '0'));
    }
    var off = Object.keys(state.on).filter(function (kind) {
      return !state.on[kind] && (page.present[kind] || kind === TOTAL) && !offAtFirst(kind);
    });
    var on = Object.keys(state.on).filter(function (kind) {
      return state.on[kind] && offAtFirst(kind);
    });
    if (off.length) {
      parts.push('off=' + off.map(encodeURIComponent).join(','));
    }
    if (on.length) {
      parts.push('on=' + on.map(encodeURIComponent).join(','));
    }
    try {
      window.history.replaceState(null, '', '#' + parts.join('&'));
    } catch (error) {
      /* an address that cannot change (some file: views): the view still works */
    }
  }

  /* ---- the chart: lines, legend toggles, hover, click and brush ---------------- */

  /* Out-of-memory failures as the program met them: one per OOM, not one
   * per failed call. The tracer numbers them as they happen: a driver's
   * refusal, its retry and the caching allocator's failure that gives up
   * after them carry one oom_number. From failures.recent (the newest
   * failed allocations): the times of each OOM's last failure, in
   * microseconds. A report without numbers (older) counts each failed call. */
  function oomTimes(report) {
    var times = [];
    var index = {};       /* oom_number -> its place in times */
    ((report.failures || {}).recent || []).forEach(function (f) {
      if (!f.oom) {
        return;
      }
      if (!f.oom_number || !(f.oom_number in index)) {
        index[f.oom_number] = times.length;
        times.push(0);
      }
      times[index[f.oom_number]] = f.time_ms * 1000;
    });
    return times;
  }

  /* How many OOMs the program met: the tracer's count, which the newest
   * failures alone may not hold, or theirs in a report without it. */
  function oomCount(report) {
    var failures = report.failures || {};
    return typeof failures.ooms === 'number' ? failures.ooms : oomTimes(report).length;
  }

  function drawChart(page, container) {
    var report = page.report;
    var width = 1000;
    var height = 300;
    var left = 78;
    var right = 12;
    var top = 10;
    var bottom = 28;
    var data;
    var ooms = oomTimes(report);
    var markTimes = [];
    if (report.timeline) {
      data = buildSeries(report);
      report.timeline.events.forEach(function (e) {
        if (e[1] === 'mark') {
          markTimes.push([e[0], e[7] || '']);
        }
      });
    } else {
      data = seriesFromSamples(report);
      ((report.marks || {}).recent || []).forEach(function (m) {
        markTimes.push([m.time_ms * 1000, m.label]);
      });
      container.appendChild(element('p', { 'class': 'note', id: 'series-info', 'data-samples': String(report.series ? report.series.samples : 0) }, [
        'No event timeline in this report (CUMEMTRACE_EVENTS=0): the lines join the growth observations ' +
        '(spread over the program\'s events, or at its marks) and the end. ' +
        'Run with CUMEMTRACE_EVENTS=1M to see every allocation and free, and the icicle at any moment.']));
    }
    var endTime = Math.max(data.end, 1);
    var legend = element('div', { 'class': 'legend', id: 'kind-toggles' });
    var box = element('div', { 'class': 'chart-box' });
    var tip = element('div', { 'class': 'tip', id: 'chart-tip' });
    container.appendChild(legend);
    container.appendChild(box);
    /* data-*: where time runs in the drawing, for tools that point at a moment. */
    var svg = svgElement('svg', { viewBox: '0 0 ' + width + ' ' + height, preserveAspectRatio: 'none', id: 'memory-chart',
      'data-end-us': String(endTime), 'data-plot-left': String(left), 'data-plot-right': String(width - right) });
    box.appendChild(svg);
    box.appendChild(tip);

    function x(t) {
      return left + (width - left - right) * t / endTime;
    }
    function timeAt(px) {
      return Math.max(0, Math.min(endTime, (px - left) / (width - left - right) * endTime));
    }

    /* The legend: one toggle per kind of memory the report holds. */
    var kinds = Object.keys(page.present).concat(data.list.some(function (s) {
      return s.kind === TOTAL;
    }) ? [TOTAL] : []);
    kinds.forEach(function (kind) {
      var input = element('input', { type: 'checkbox', 'data-kind': kind });
      input.checked = !!page.state.on[kind];
      input.addEventListener('change', function () {
        page.state.on[kind] = input.checked;
        page.changed('kinds');
      });
      legend.appendChild(element('label', { title: kind === TOTAL ? 'the sum of the kinds that occupy device memory'
        : kind === SEGMENTS ? 'in the icicle: what a framework\'s cache took from the driver and its blocks leave unused ' +
          '(its blocks are drawn by their own lines)' : '' }, [
        input, element('i', { style: 'background:' + (KIND_COLORS[kind] || '#555') }), kind]));
    });

    var overlay;
    var brush;
    var cursor;
    var momentLine;
    function draw() {
      clear(svg);
      var shown = data.list.filter(function (s) {
        return page.state.on[s.kind];
      });
      var maxBytes = 1;
      shown.forEach(function (s) {
        s.points.forEach(function (p) {
          maxBytes = Math.max(maxBytes, p[1]);
        });
      });
      var axis = byteTicks(maxBytes * 1.02);
      function y(b) {
        return top + (height - top - bottom) * (1 - b / axis.top);
      }
      axis.ticks.forEach(function (t) {
        svg.appendChild(svgElement('line', { 'class': 'grid', x1: left, x2: width - right, y1: y(t.value), y2: y(t.value) }));
        svg.appendChild(svgElement('text', { x: left - 6, y: y(t.value) + 4, 'text-anchor': 'end', 'class': 'tick' }, t.label));
      });
      timeTicks(endTime).forEach(function (t) {
        svg.appendChild(svgElement('line', { 'class': 'axis', x1: x(t.value), x2: x(t.value), y1: height - bottom, y2: height - bottom + 4 }));
        svg.appendChild(svgElement('text', { x: x(t.value), y: height - 8, 'text-anchor': 'middle', 'class': 'tick' }, t.label));
      });
      svg.appendChild(svgElement('line', { 'class': 'axis', x1: left, x2: left, y1: top, y2: height - bottom }));
      svg.appendChild(svgElement('line', { 'class': 'axis', x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }));

      /* Marks: dashed lines when they are few and apart; else short ticks
       * along the top, so that thirty of them do not make a dark block. */
      var spacing = Infinity;
      markTimes.forEach(function (m, i) {
        if (i) {
          spacing = Math.min(spacing, x(m[0]) - x(markTimes[i - 1][0]));
        }
      });
      var sparse = markTimes.length <= 12 && spacing >= 12;
      markTimes.forEach(function (m) {
        var line = svgElement('line', { 'class': sparse ? 'mark' : 'mark-tick', x1: x(m[0]), x2: x(m[0]), y1: top, y2: sparse ? height - bottom : top + 7 });
        line.appendChild(svgElement('title', {}, 'mark: ' + m[1] + ' at ' + formatSeconds(m[0])));
        svg.appendChild(line);
      });
      ooms.forEach(function (t) {
        var line = svgElement('line', { 'class': 'oom', x1: x(t), x2: x(t), y1: top, y2: height - bottom });
        line.appendChild(svgElement('title', {}, 'out of memory at ' + formatSeconds(t)));
        svg.appendChild(line);
      });

      /* Step lines, at most a few points per pixel column: the highest and
       * the last value of each column. */
      shown.forEach(function (s) {
        var path = '';
        var column = null;
        var columnMax = 0;
        var last = null;
        function flush() {
          if (column !== null) {
            path += ' V' + y(columnMax).toFixed(1) + ' V' + y(last).toFixed(1);
          }
        }
        s.points.forEach(function (p, i) {
          var px = Math.round(x(p[0]));
          if (i === 0) {
            path = 'M' + px + ' ' + y(p[1]).toFixed(1);
            column = px;
            columnMax = p[1];
            last = p[1];
            return;
          }
          if (px !== column) {
            flush();
            path += ' H' + px;
            column = px;
            columnMax = p[1];
          }
          columnMax = Math.max(columnMax, p[1]);
          last = p[1];
        });
        flush();
        var line = svgElement('path', { d: path, fill: 'none', stroke: KIND_COLORS[s.kind] || '#555',
          'stroke-width': s.kind === TOTAL ? 2.5 : 1.5, 'stroke-dasharray': s.kind === TOTAL ? '6 3' : 'none',
          'data-series': s.name });
        line.appendChild(svgElement('title', {}, s.name));
        svg.appendChild(line);
      });
      if (page.replay) {
        var peak = highest(page.sums(), 0, page.replay.events.length - 1);
        if (peak.index >= 0) {
          var dot = svgElement('circle', { cx: x(page.replay.events[peak.index][0]), cy: y(peak.bytes), r: 4, 'class': 'peak-dot' });
          dot.appendChild(svgElement('title', {}, 'highest point of the kinds shown: ' + formatBytes(peak.bytes) +
            ' at ' + formatSeconds(page.replay.events[peak.index][0])));
          svg.appendChild(dot);
        }
      }
      brush = svgElement('rect', { 'class': 'brush', x: 0, y: top, width: 0, height: height - top - bottom, visibility: 'hidden' });
      cursor = svgElement('line', { 'class': 'cursor', y1: top, y2: height - bottom, visibility: 'hidden' });
      momentLine = svgElement('line', { 'class': 'moment', y1: top, y2: height - bottom, visibility: 'hidden' });
      overlay = svgElement('rect', { 'class': 'overlay', x: left, y: top, width: width - left - right, height: height - top - bottom });
      svg.appendChild(brush);
      svg.appendChild(momentLine);
      svg.appendChild(cursor);
      svg.appendChild(overlay);
      showMoment();
    }

    function showMoment() {
      var m = page.state.moment;
      if (m && (m.kind === 'event' || m.kind === 'peak') && m.index >= 0) {
        var px = x(page.replay.events[m.index][0]);
        momentLine.setAttribute('x1', px);
        momentLine.setAttribute('x2', px);
        momentLine.setAttribute('visibility', 'visible');
      } else {
        momentLine.setAttribute('visibility', 'hidden');
      }
      if (m && m.range) {
        brush.setAttribute('x', x(m.range[0]));
        brush.setAttribute('width', Math.max(0, x(m.range[1]) - x(m.range[0])));
        brush.setAttribute('visibility', 'visible');
      } else {
        brush.setAttribute('visibility', 'hidden');
      }
    }

    function svgX(event) {
      var rect = svg.getBoundingClientRect();
      return (event.clientX - rect.left) / Math.max(1, rect.width) * width;
    }

    /* Hover: the top sites at that moment, from the replay. */
    var hovered = null;
    function hover(event) {
      var px = svgX(event);
      var time = timeAt(px);
      cursor.setAttribute('x1', x(time));
      cursor.setAttribute('x2', x(time));
      cursor.setAttribute('visibility', 'visible');
      var rows = [element('div', { 'class': 'tip-time' }, ['at ' + formatSeconds(time)])];
      if (page.replay) {
        var index = page.replay.indexAt(time);
        hovered = index;
        var sums = page.sums();
        rows.push(element('div', {}, [formatBytes(index >= 0 ? sums.after[index] : sums.before) + ' of the kinds shown']));
        var entries = entriesAt(page, { kind: 'event', index: index });
        topSites(page, entries, 5).forEach(function (site) {
          rows.push(element('div', { 'class': 'tip-site' }, [element('b', {}, [formatBytes(site[1])]), ' ' + site[0]]));
        });
      } else {
        rows.push(element('div', {}, ['(no event timeline: no sites per moment)']));
      }
      clear(tip);
      rows.forEach(function (row) {
        tip.appendChild(row);
      });
      var rect = svg.getBoundingClientRect();
      var fraction = (event.clientX - rect.left) / Math.max(1, rect.width);
      tip.style.left = fraction < 0.6 ? (fraction * 100 + 1) + '%' : 'auto';
      tip.style.right = fraction < 0.6 ? 'auto' : ((1 - fraction) * 100 + 1) + '%';
      tip.style.display = 'block';
      tip.setAttribute('data-index', String(page.replay ? hovered : -1));
    }

    var dragFrom = null;
    box.addEventListener('mousemove', function (event) {
      hover(event);
      if (dragFrom !== null) {
        var a = Math.max(left, Math.min(dragFrom, svgX(event)));
        var b = Math.min(width - right, Math.max(dragFrom, svgX(event)));
        brush.setAttribute('x', a);
        brush.setAttribute('width', Math.max(0, b - a));
        brush.setAttribute('visibility', 'visible');
      }
    });
    box.addEventListener('mouseleave', function () {
      tip.style.display = 'none';
      cursor.setAttribute('visibility', 'hidden');
    });
    box.addEventListener('mousedown', function (event) {
      if (page.replay) {
        dragFrom = svgX(event);
        event.preventDefault();
      }
    });
    box.addEventListener('mouseup', function (event) {
      if (dragFrom === null) {
        return;
      }
      var to = svgX(event);
      var t0 = timeAt(Math.min(dragFrom, to));
      var t1 = timeAt(Math.max(dragFrom, to));
      var wide = Math.abs(to - dragFrom) >= 4;
      dragFrom = null;
      selectTime(t0, t1, wide);
    });

    /* A click: the icicle at that moment; a range: at its highest point. */
    function selectTime(t0, t1, wide) {
      page.state.moment = wide ? rangeMoment(page, t0, t1) : timeMoment(page, t0);
      page.changed('moment');
    }

    legend.appendChild(element('span', { 'class': 'legend-note' }, [
      (ooms.length ? 'red: out of memory (' + ooms.length + '); ' : '') +
      (markTimes.length ? 'grey: marks (' + markTimes.length + '); ' : '') +
      (page.replay ? 'hover for the top sites, click or drag for the icicle below' : '')]));
    draw();
    page.redraws.push(function (what) {
      if (what === 'kinds') {
        draw();
      } else if (what === 'moment') {
        showMoment();
      }
    });
  }

  /* ---- the icicle ------------------------------------------------------ */

  function buildTree(page, entries) {
    var root = { name: 'all', value: 0, children: {}, stacks: [] };
    var kinds = {};
    entries.forEach(function (e) {
      kinds[e.kind] = true;
    });
    var byKind = Object.keys(kinds).length > 1;
    entries.forEach(function (entry) {
      if (entry.bytes <= 0) {
        return;
      }
      var node = root;
      root.value += entry.bytes;
      var path = entry.path || page.stacks.path(entry.stack, page.state.allFrames);
      (byKind ? ['[' + entry.kind + ']'].concat(path) : path).forEach(function (name) {
        if (!node.children[name]) {
          node.children[name] = { name: name, value: 0, children: {}, parent: node };
        }
        node = node.children[name];
        node.value += entry.bytes;
      });
    });
    return root;
  }

  function colorFor(name) {
    var hash = 0;
    for (var i = 0; i < name.length; i++) {
      hash = (hash * 31 + name.charCodeAt(i)) | 0;
    }
    var hue = 20 + Math.abs(hash) % 40;
    var light = 62 + Math.abs(hash >> 8) % 20;
    return 'hsl(' + hue + ',85%,' + light + '%)';
  }

  function childrenOf(node) {
    return Object.keys(node.children).map(function (k) {
      return node.children[k];
    }).sort(function (a, b) {
      return b.value - a.value || (a.name < b.name ? -1 : 1);
    });
  }

  function drawIcicle(page, section) {
    var controls = element('div', { 'class': 'controls' });
    var title = element('h3', { id: 'icicle-title' });
    var searchNote = element('span', { 'class': 'note', id: 'search-note' });
    var box = element('div', { 'class': 'icicle', id: 'icicle' });
    section.appendChild(controls);
    section.appendChild(title);
    section.appendChild(box);

    var moments = [];
    if (page.replay) {
      moments.push(['peak', 'At the highest point']);
    }
    if (page.replay && (page.report.failures || {}).last_oom && page.report.reason !== 'oom') {
      moments.push(['oom', 'At the out-of-memory failure']);
    }
    if (page.report.program_end && page.held.length) {
      moments.push(['program-end', 'When the program ended']);
    }
    moments.push(['end', page.report.reason === 'exit' ? (page.report.program_end ? 'After the teardown' : 'At the end')
      : page.report.reason === 'oom' ? 'At the OOM' : 'Now']);
    if (!page.replay) {
      moments.push(['site-peaks', 'Each site at its own highest']);
    }
    moments.forEach(function (m) {
      var button = element('button', { type: 'button', 'data-moment': m[0] }, [m[1]]);
      button.addEventListener('click', function () {
        page.state.moment = namedMoment(page, m[0]);
        page.changed('moment');
      });
      controls.appendChild(button);
    });
    var search = element('input', { type: 'search', id: 'search', placeholder: 'search frames', size: 28 });
    search.value = page.state.search;
    search.addEventListener('input', function () {
      page.state.search = search.value.trim().toLowerCase();
      page.changed('search');
    });
    var all = element('input', { type: 'checkbox', id: 'all-frames' });
    all.checked = page.state.allFrames;
    all.addEventListener('change', function () {
      page.state.allFrames = all.checked;
      page.state.zoom = [];
      page.changed('frames');
    });
    controls.appendChild(search);
    controls.appendChild(element('label', { title: 'start-up, the interpreter\'s and the frameworks\' frames, hidden by default' }, [all, 'all frames']));
    controls.appendChild(searchNote);

    function draw() {
      var entries = entriesAt(page, page.state.moment);
      var root = buildTree(page, entries);
      var query = page.state.search;
      clear(box);
      /* The focus: the zoomed node, or as deep as the path still leads. */
      var focus = root;
      var ancestors = [];
      page.state.zoom.forEach(function (name) {
        if (focus.children[name]) {
          ancestors.push(focus);
          focus = focus.children[name];
        }
      });
      var rowHeight = 18;
      var depth = 0;
      function bar(node, level, start, fraction, extra) {
        var text = node === root ? 'all: ' + formatBytes(node.value) : node.name;
        var matched = query && node !== root && node.name.toLowerCase().indexOf(query) >= 0;
        var div = element('div', {
          'class': 'frame' + (node === root ? ' root' : '') + (matched ? ' match' : '') +
            (query && !matched && node !== root && !extra ? ' dim' : '') + (extra || ''),
          style: 'left:' + (start * 100) + '%;width:' + (fraction * 100) + '%;top:' + (level * rowHeight) + 'px;' +
            (node === root || extra ? '' : 'background:' + colorFor(node.name)),
          title: node.name + '\n' + formatBytes(node.value) + ' (' + (node.value / Math.max(1, root.value) * 100).toFixed(1) + '% of the icicle)',
          'data-name': node.name, 'data-bytes': String(node.value)
        }, [text]);
        div.addEventListener('click', function () {
          var path = [];
          for (var n = node; n && n !== root; n = n.parent) {
            path.unshift(n.name);
          }
          page.state.zoom = path;
          page.changed('zoom');
        });
        box.appendChild(div);
        depth = Math.max(depth, level + 1);
      }
      ancestors.forEach(function (node, level) {
        bar(node, level, 0, 1, ' ancestor');
      });
      function place(node, level, start) {
        var fraction = node.value / Math.max(1, focus.value);
        if (fraction < 0.002) {
          return;
        }
        bar(node, level, start, fraction, node === focus && ancestors.length ? ' focus' : '');
        var offset = start;
        childrenOf(node).forEach(function (child) {
          place(child, level + 1, offset);
          offset += child.value / Math.max(1, focus.value);
        });
      }
      if (root.value > 0) {
        place(focus, ancestors.length, 0);
      } else {
        box.appendChild(element('p', { 'class': 'note' }, ['No memory of the kinds shown is live here.']));
        depth = 2;
      }
      box.style.height = (depth * rowHeight + 2) + 'px';
      box.setAttribute('data-total', String(root.value));
      box.setAttribute('data-moment', page.state.moment.kind + (page.state.moment.index !== undefined ? ':' + page.state.moment.index : ''));
      box.setAttribute('data-moment-name', page.state.moment.hash);
      box.setAttribute('data-focus', focus === root ? '' : focus.name);
      box.setAttribute('data-focus-bytes', String(focus.value));
      title.textContent = 'Live memory by stack ' + page.state.moment.label + ': ' + formatBytes(root.value) +
        (focus !== root ? '; zoomed into ' + focus.name + ' (' + formatBytes(focus.value) + '; click a bar above to zoom out)' : '');
      var searched = 0;
      if (query) {
        entries.forEach(function (e) {
          if (e.path ? e.path[0].toLowerCase().indexOf(query) >= 0
            : page.stacks.matches(e.stack, query, page.state.allFrames)) {
            searched += e.bytes;
          }
        });
        searchNote.textContent = '"' + query + '": ' + formatBytes(searched) + ' (' +
          (searched / Math.max(1, root.value) * 100).toFixed(1) + '%) of this icicle';
      } else {
        searchNote.textContent = '';
      }
      box.setAttribute('data-search-bytes', String(searched));
      Array.prototype.forEach.call(controls.querySelectorAll('button'), function (button) {
        button.className = button.getAttribute('data-moment') === page.state.moment.hash ? 'on' : '';
      });
    }
    draw();
    page.redraws.push(draw);
  }

  /* ---- tables ---------------------------------------------------------- */

  function table(headers, rows, id) {
    var numeric = headers.map(function (h) {
      return /^#$|bytes|blocks|rate|current|peak|allocated|now|ooms|failures|total|teardown/.test(h);
    });
    var head = element('tr', {}, headers.map(function (h, i) {
      return element('th', { 'class': numeric[i] ? 'num' : '' }, [h]);
    }));
    var body = rows.map(function (cells) {
      return element('tr', {}, cells.map(function (cell, i) {
        if (cell && cell.nodeType) {
          return element('td', { 'class': 'stack' }, [cell]);
        }
        return element('td', { 'class': numeric[i] ? 'num' : '' }, [String(cell)]);
      }));
    });
    return element('table', id ? { id: id } : {}, [element('thead', {}, [head]), element('tbody', {}, body)]);
  }

  function stackCell(page, stackId) {
    return element('details', {}, [element('summary', {}, [page.stacks.site(stackId)]),
      element('pre', {}, [page.stacks.detail(stackId, page.state.allFrames)])]);
  }

  function card(id, label, value, text, tone) {
    return element('div', { 'class': 'card' + (tone ? ' ' + tone : ''), id: id, 'data-value': String(value) }, [
      element('div', { 'class': 'label' }, [label]), element('div', { 'class': 'value' }, [text])]);
  }

  function section(id, heading, children, tone) {
    return element('section', { id: id, 'class': tone || '' }, [element('h2', {}, [heading])].concat(children));
  }

  /* The report's findings (findings.c), one line each as the text report
   * opens with them: LABEL at SITE: TEXT; the top sites of a finding
   * indented under it. Reports from before findings have none: no section. */
  function findingsSection(page) {
    var findings = page.report.findings;
    if (!findings || !findings.length) {
      return null;
    }
    var calm = { none: true, held_at_end: true, live: true };
    var items = findings.map(function (f) {
      var children = [element('span', { 'class': 'finding-label' }, [f.label])];
      if (f.site) {
        children.push((f.label ? ' at ' : 'at '));
        children.push(element('code', {}, [f.site]));
      }
      children.push(': ' + f.text);
      return element('li', { 'class': (f.detail ? 'detail ' : '') + (calm[f.verdict] ? 'calm' : 'bad'),
        'data-verdict': f.verdict }, children);
    });
    var bad = findings.some(function (f) {
      return !calm[f.verdict];
    });
    return section('findings', 'Findings', [element('ul', { 'class': 'findings' }, items)], bad ? 'bad' : 'neutral');
  }

  /* Leaked and held tables: groups of live blocks by site; held ones (in
   * held_at_end) say what the interpreter's teardown freed of them. */
  function groupSection(page, id, heading, groups, note, tone, heldTable) {
    var rows = groups.slice(0, 100).map(function (g, i) {
      return [i + 1, formatBytes(g.bytes), g.blocks, g.kind, g.api, deviceName(g.device),
        heldTable ? formatBytes(g.freed_at_teardown_bytes || 0) : formatSeconds(g.oldest_ms * 1000),
        stackCell(page, g.stack)];
    });
    return section(id, heading + (groups.length > 100 ? ' (first 100 of ' + groups.length + ')' : ''),
      [element('p', { 'class': 'note' }, [note])].concat(rows.length
        ? [table(['#', 'bytes', 'blocks', 'kind', 'api', 'device', heldTable ? 'freed at teardown' : 'oldest from',
          'site'], rows, id + '-table')]
        : [element('p', {}, ['Nothing.'])]), tone);
  }

  /* The live groups that are a framework's cache segments whose blocks the
   * report records (Page), or, with segments false, the others: at exit,
   * those not held when the program ended (live[].held_at_end). */
  function liveGroups(page, segments) {
    var atExit = page.report.reason === 'exit';
    return (page.report.live || []).filter(function (g) {
      return segments ? !!page.segments[g.stack] : !page.segments[g.stack] && !(atExit && g.held_at_end);
    });
  }

  /* Each framework's cache per device (caches[]): where its blocks are
   * recorded, what its segments reserve and how its blocks use them; else
   * why they are not. */
  function cacheSection(page) {
    var rows = [];
    var notes = [];
    (page.report.caches || []).forEach(function (c) {
      var name = CACHE_KINDS[c.kind] || c.kind;
      if (c.view !== 'blocks') {
        if (c.view === 'segments') {
          notes.push(element('p', { 'class': 'note' }, [name + '\'s blocks are not traced one by one' +
            (c.why ? ' (' + c.why + ')' : '') + ': its segments are listed as the lines that first needed them.']));
        }
        return;
      }
      (c.devices || []).forEach(function (d) {
        function count(n, what) {
          return n + ' ' + what + (n === 1 ? '' : 's');
        }
        rows.push([name, deviceName(d.device), formatBytes(d.reserved_bytes) + ' (' + count(d.segments, 'segment') + ')',
          formatBytes(d.block_bytes) + ' (' + count(d.blocks, 'block') + ')', formatBytes(d.unused_bytes),
          formatBytes(d.hole_bytes) + ' (' + count(d.holes, 'hole') +
          (d.holes ? ', largest ' + formatBytes(d.largest_hole_bytes) : '') + ')', formatBytes(d.releasable_bytes)]);
      });
    });
    if (!rows.length && !notes.length) {
      return null;
    }
    var atEnd = page.report.reason === 'exit' && page.report.program_end;
    return section('caches', 'Frameworks\' caches, per device' + (atEnd ? ', at the program\'s end' : ''),
      [element('p', { 'class': 'note' }, [
      'Reserved: the segments a cache took from the driver (counted once, as device memory); its blocks are carved ' +
      'from them. Unused: reserved less the blocks; of it, holes between live blocks reuse only requests that fit, ' +
      'and segments with no live block are what emptying the cache gives back.'])].concat(notes).concat(rows.length
      ? [table(['framework', 'device', 'reserved bytes', 'in blocks', 'unused bytes', 'in holes', 'releasable bytes'],
        rows, 'caches-table')] : []));
  }

  function drawTables(page, container) {
    var report = page.report;
    clear(container);
    var atExit = report.reason === 'exit';
    var ended = !!report.program_end;
    /* What grows first: the leak suspects are what most reports are read for. */
    var growing = report.growth ? report.growth.growing : [];
    /* Per mark where the program marks its steps; else per call of the site
     * (reports of earlier versions have no calls), then per second. */
    function growthRate(g) {
      if (report.growth.mode === 'marks') return formatBytes(g.rate) + ' per mark';
      var perSecond = formatBytes(g.rate) + '/s';
      return g.calls && g.rate_per_call >= 1 ? formatBytes(g.rate_per_call) + ' a call over ' + g.calls +
        (g.calls === 1 ? ' call, ' : ' calls, ') + perSecond : perSecond;
    }
    var growRows = growing.map(function (g, i) {
      var rate = growthRate(g);
      return [i + 1, formatBytes(g.live_bytes), rate, g.rises + ' of ' + g.samples_since_first, stackCell(page, g.stack)];
    });
    container.appendChild(section('growing', 'Growing (leak suspects)', [growRows.length
      ? table(['#', 'live bytes', 'rate', 'rose at samples', 'site'], growRows, 'growing-table')
      : element('p', {}, [report.growth ? 'None of ' + report.growth.samples + ' samples showed a site that keeps growing.'
        : 'Not known (no samples in this report).'])]));
    /* Sites that grew as a leak does, then were freed at the run's last samples
     * (older reports have no such list). */
    var released = report.growth && report.growth.released ? report.growth.released : [];
    if (released.length) {
      var releasedRows = released.map(function (g, i) {
        var rate = growthRate(g);
        return [i + 1, formatBytes(g.peak_bytes), rate, formatBytes(g.live_bytes),
          g.peak_rises + ' of ' + (g.samples_since_first - g.samples_since_peak), stackCell(page, g.stack)];
      });
      container.appendChild(section('released', 'Grew, then freed near the end (peak-memory suspects; not held at the end)',
        [table(['#', 'peak', 'rate while it grew', 'live bytes', 'rose at samples to the peak', 'site'], releasedRows,
          'released-table')]));
    }

    var live = liveGroups(page, false);
    container.appendChild(groupSection(page, 'leaks', atExit ? (ended ? 'Leaked: allocated after the program ended, freed by nobody'
      : 'Leaked: live at the end, freed by nobody') : 'Live now',
      live, atExit ? (ended ? 'Memory the interpreter\'s teardown allocated and nothing freed; what the program held at its ' +
        'end is below, not a leak.' : 'Memory live when the process ended.') : 'Memory live when this report was written.',
      atExit && live.length ? 'bad' : ''));
    if (page.held.length) {
      container.appendChild(groupSection(page, 'held-at-end', 'Held at the end of the program (not leaked)', page.held,
        'Memory the program kept to its last line (model weights, a data set, a global list): not a leak, whether the ' +
        'interpreter\'s teardown freed it or left it to the process\'s exit. A leak in a running program shows as growth.',
        'neutral', true));
    }
    var kept = liveGroups(page, true);
    if (kept.length) {
      container.appendChild(groupSection(page, 'cache-segments', 'Kept in a framework\'s cache: its segments from the driver',
        kept, 'A framework\'s cache keeps these to hand them out again; the blocks it carved from them are listed with ' +
        'their own lines. Each segment is charged to the line that first needed it; not a leak of the program\'s.', 'neutral'));
    }
    var caches = cacheSection(page);
    if (caches) {
      container.appendChild(caches);
    }

    var holders = (report.stacks || []).filter(function (s) {
      return s.peak_live_bytes > 0 && !page.segments[s.id];
    }).sort(function (a, b) {
      return b.peak_live_bytes - a.peak_live_bytes || a.id - b.id;
    });
    if (holders.length) {
      container.appendChild(section('largest-holders', 'Largest holders during the run (highest live bytes per allocation site)' +
        (holders.length > 50 ? ' (first 50)' : ''), [table(['#', 'peak', 'now', 'allocations', 'allocated in total', 'kind', 'api', 'site'],
        holders.slice(0, 50).map(function (s, i) {
          return [i + 1, formatBytes(s.peak_live_bytes), formatBytes(s.live_bytes), s.allocations, formatBytes(s.allocated_bytes),
            s.kind || '', s.api || '', stackCell(page, s.id)];
        }), 'holders-table')]));
    }

    var counterRows = [];
    (report.devices || []).forEach(function (d) {
      var summed = summedDevices(report)[d.device];
      Object.keys(d.counters).forEach(function (kind) {
        var c = d.counters[kind];
        if (kind === 'device_memory' ? !summed : c.allocation.allocated === 0 && c.num_alloc_failures === 0) {
          return;
        }
        counterRows.push([deviceName(d.device), kind === 'device_memory' ? TOTAL : kind, formatBytes(c.allocated_bytes.current),
          formatBytes(c.allocated_bytes.peak), formatBytes(c.allocated_bytes.allocated), c.allocation.current,
          c.allocation.allocated, c.num_alloc_failures, c.num_ooms]);
      });
      if (d.driver_total !== null) {
        counterRows.push([deviceName(d.device), 'driver', formatBytes(d.driver_total - d.driver_free) + ' used', formatBytes(d.driver_total) + ' total',
          'untracked ' + formatBytes(d.untracked_bytes), '', '', '', '']);
      }
    });
    if (counterRows.length) {
      container.appendChild(section('counters', 'Counters per device and kind', [
        element('p', { 'class': 'note' }, ['all device memory: the kinds that occupy device memory, summed (shown when there are several).']),
        table(['device', 'kind', 'current', 'peak', 'allocated', 'blocks current', 'blocks allocated', 'failures', 'ooms'], counterRows, 'counter-table')]));
    }
    if (report.torch) {
      var torchRows = [];
      report.torch.devices.forEach(function (d) {
        Object.keys(d).forEach(function (name) {
          if (name !== 'device' && d[name] !== null) {
            torchRows.push([deviceName(d.device), name, /bytes|split$/.test(name) ? formatBytes(d[name]) : d[name]]);
          }
        });
      });
      var when = !report.torch.now ? (report.torch.age_ms / 1000).toFixed(1) + ' s before this report: ' +
        (report.torch.why_not || 'not read for it') : report.torch.read === 'python_exit' ? 'at Python\'s exit'
        : report.torch.read === 'oom_observer' ? 'at the OOM, in PyTorch\'s out-of-memory observer' : 'at this report';
      container.appendChild(section('torch', 'PyTorch\'s own counters (torch.cuda.memory_stats(), read ' + when + ')',
        [table(['device', 'figure', 'value'], torchRows, 'torch-table')]));
    }

    var f = report.fragmentation || {};
    var verdict = f.verdict || 'none';
    var fragmentationRows = [
      ['stream-ordered pools: reserved', formatBytes(f.pool_reserved_bytes || 0)],
      ['stream-ordered pools: used', formatBytes(f.pool_used_bytes || 0)],
      ['stream-ordered pools: idle', formatBytes(f.pool_idle_bytes || 0)],
      ['VMM address space reserved', formatBytes(f.vmm_reserved_bytes || 0)],
      ['VMM mapped', formatBytes(f.vmm_mapped_bytes || 0)],
      ['VMM reserved, not mapped', formatBytes(f.vmm_unmapped_bytes || 0)]];
    if (f.torch_reserved_bytes !== null && f.torch_reserved_bytes !== undefined) {
      fragmentationRows.push(['PyTorch: reserved', formatBytes(f.torch_reserved_bytes)],
        ['PyTorch: cached, unused', formatBytes(f.torch_cached_bytes)],
        ['PyTorch: free in holes between tensors', formatBytes(f.torch_inactive_split_bytes) + ' in ' + f.torch_inactive_split_blocks]);
    }
    container.appendChild(section('fragmentation', 'Fragmentation and idle reserves', [
      element('p', {}, ['Verdict: ', element('span', { 'class': verdict === 'none' ? 'verdict-none' : 'verdict-bad' }, [verdict]),
        f.reason ? ' (' + f.reason + ')' : '']),
      table(['what', 'bytes'], fragmentationRows)]));

    var failures = (report.failures || {}).recent || [];
    if (failures.length) {
      container.appendChild(section('failures', 'Failed allocations (' + report.failures.total + ')', [
        table(['#', 'bytes', 'kind', 'api', 'device', 'error', 'at', 'site'], failures.map(function (x, i) {
          return [i + 1, formatBytes(x.size), x.kind, x.api, deviceName(x.device),
            x.code + (x.error ? ' ' + x.error : '') + (x.oom ? ' (out of memory)' : ''),
            formatSeconds(x.time_ms * 1000), stackCell(page, x.stack)];
        }), 'failures-table')]));
    }
  }

  /* ---- the page -------------------------------------------------------- */

  /* What PyTorch's tensors are (the report's "classes"): the split, the
   * parameters holding the most, and the rest by site; one line when it is
   * not known. */
  function classesSection(page) {
    var k = page.report.classes;
    if (!k) {
      return null;
    }
    if (!k.known) {
      return section('classes', 'What the tensors are', [element('p', { 'class': 'note' }, ['Not known: ' + k.why + '.'])]);
    }
    var words = { parameters: 'parameters', gradients: 'gradients', optimizer_state: 'optimizer state', rest: 'the rest (activations, temporaries, data)' };
    var split = Object.keys(words).map(function (name) {
      return [words[name], formatBytes(k[name].bytes), k[name].blocks];
    });
    var holders = k.holders.map(function (h) {
      return [h.name, formatBytes(h.parameters), formatBytes(h.gradients), formatBytes(h.optimizer_state)];
    });
    var sites = k.rest_sites.map(function (s, i) {
      return [i + 1, formatBytes(s.bytes), s.blocks, stackCell(page, s.stack)];
    });
    var atEnd = page.report.reason === 'exit' && page.report.program_end;
    return section('classes', 'What the tensors are' + (atEnd ? ', at the program\'s end' : '') + ' (from ' +
      k.modules + ' modules and ' + k.optimizers + ' optimizers)', [
      table(['what', 'bytes', 'tensors'], split, 'classes-table'),
      holders.length ? table(['parameter', 'itself', 'its gradient', 'its optimizer state'], holders, 'class-holders-table') : '',
      sites.length ? table(['#', 'the rest', 'tensors', 'site'], sites, 'class-rest-table') : ''].filter(Boolean));
  }

  function render(report) {
    var page = Page(report);
    var app = clear(document.getElementById('app'));
    var argv = (report.process.argv || []).join(' ');
    app.appendChild(element('header', {}, [
      element('h1', {}, ['cumemtrace ' + report.reason + ' report: ' + (argv || 'pid ' + report.process.pid)]),
      element('div', { 'class': 'meta' }, ['pid ' + report.process.pid + ' on ' + report.process.host + ', ' +
        report.process.duration_s.toFixed(1) + ' s after start, written ' +
        new Date(report.process.time * 1000).toISOString() + ' by cumemtrace ' + report.tracer.version])]));
    var main = element('main');
    app.appendChild(main);
    var findings = findingsSection(page);
    if (findings) {
      main.appendChild(findings);
    }

    var liveDevice = 0;
    var peakDevice = 0;
    var ooms = oomCount(report);
    (report.devices || []).forEach(function (d) {
      liveDevice += d.counters.device_memory.allocated_bytes.current;
      peakDevice = Math.max(peakDevice, d.counters.device_memory.allocated_bytes.peak);
    });
    function sum(groups) {
      var total = { bytes: 0, blocks: 0, sites: {} };
      (groups || []).forEach(function (g) {
        total.bytes += g.bytes;
        total.blocks += g.blocks;
        total.sites[g.stack] = true;
      });
      total.sites = Object.keys(total.sites).length;
      return total;
    }
    var leaked = sum(liveGroups(page, false));
    var atExit = report.reason === 'exit';
    var growing = report.growth ? report.growth.growing : [];
    var verdict = (report.fragmentation || {}).verdict || 'none';
    var cards = [
      card('live-device-bytes', 'All device memory live', liveDevice, formatBytes(liveDevice)),
      card('peak-device-bytes', 'Peak device memory (one device)', peakDevice, formatBytes(peakDevice))];
    if (page.held.length) {
      var held = sum(page.held);
      cards.push(card('held-bytes', 'Held at the end of the program (not leaked)', held.bytes, formatBytes(held.bytes), 'neutral'));
    }
    /* A program whose holdings were held at its end leaked nothing: no
     * "Leaked 0" beside what it held. */
    if (!(atExit && page.held.length && leaked.blocks === 0)) {
      cards.push(card('leaked-bytes', atExit ? (report.program_end ? 'Leaked after the program ended, all kinds'
        : 'Leaked (freed by nobody), all kinds') : 'Live now, all kinds', leaked.bytes,
        formatBytes(leaked.bytes), atExit && leaked.bytes > 0 ? 'bad' : ''),
        card('leaked-blocks', atExit ? 'Leaked blocks' : 'Live blocks', leaked.blocks, String(leaked.blocks)),
        card('leaked-sites', 'Allocation sites holding them', leaked.sites, String(leaked.sites), atExit && leaked.sites > 0 ? 'bad' : ''));
    }
    cards.push(card('growing-sites', 'Growing sites (leak suspects)', growing.length, String(growing.length), growing.length > 0 ? 'bad' : ''),
      card('ooms', 'Out-of-memory failures', ooms, String(ooms), ooms > 0 ? 'bad' : ''),
      card('fragmentation-verdict', 'Fragmentation', verdict, verdict, verdict !== 'none' ? 'bad' : ''));
    main.appendChild(element('section', {}, [element('div', { 'class': 'cards' }, cards)]));

    if (report.event && report.event.type === 'oom') {
      var e = report.event;
      var free = e.driver_free === null ? 'unknown' : formatBytes(e.driver_free);
      /* A framework's allocator gave up (its cache's terms, report_cache_oom),
       * or a CUDA call failed. */
      var what = e.cache ? (CACHE_KINDS[e.kind] || e.kind) + '\'s allocator gave up on ' + formatBytes(e.size) + ' on ' +
        deviceName(e.device) + ', after freeing its cache and asking again; the driver had ' + free + ' free. Verdict: ' +
        e.verdict.replace(/_/g, ' ') + ' (its cache reserved ' + formatBytes(e.cache.reserved_bytes) + ', its blocks used ' +
        formatBytes(e.cache.block_bytes) + ', ' + formatBytes(e.cache.hole_bytes) + ' in holes between them, ' +
        formatBytes(e.cache.releasable_bytes) + ' in segments with none; memory outside the cache: ' +
        formatBytes(e.cache.others_bytes) + ').' + (e.cache.hole_why ? ' Why no hole served: ' + e.cache.hole_why + '.' : '')
        : formatBytes(e.size) + ' of ' + e.kind + ' memory via ' + e.api + ' on ' + deviceName(e.device) +
        ' failed (error ' + e.code + (e.error ? ' ' + e.error : '') + '); the driver had ' + free + ' free: ' + e.verdict + '.';
      main.appendChild(section('oom-event', 'Out of memory', [
        element('p', {}, [what + ' Retry: ' + e.retry + '.']), stackCell(page, e.stack)], 'bad'));
    }

    var classes = classesSection(page);
    if (classes) {
      main.appendChild(classes);
    }

    page.state.moment = namedMoment(page, page.hashMoment) || leadingMoment(page);
    var chart = section('chart-section', 'Live bytes over time, per device and kind', [], 'chart');
    if (report.timeline) {
      chart.appendChild(element('p', { 'class': 'note', id: 'timeline-info', 'data-events': String(report.timeline.events.length), 'data-dropped': String(report.timeline.dropped) }, [
        report.timeline.events.length + ' events recorded' + (report.timeline.dropped ? ', the oldest ' + report.timeline.dropped + ' dropped (ring of ' + report.timeline.capacity + ')' : '') +
        '. Dashed dark line: all device memory of a device (when several kinds make it); red: out of memory; grey: marks.']));
    }
    main.appendChild(chart);
    drawChart(page, chart);

    var flames = section('flame-section', 'Live memory by stack (outermost frame on top; click a frame to zoom)', []);
    main.appendChild(flames);
    drawIcicle(page, flames);

    var tables = element('div', { id: 'tables' });
    main.appendChild(tables);
    drawTables(page, tables);
    page.redraws.push(function (what) {
      if (what === 'frames') {
        drawTables(page, tables);
      }
    });
    return page;
  }

  try {
    render(JSON.parse(document.getElementById('report-data').textContent));
    document.body.setAttribute('data-rendered', '1');
  } catch (error) {
    recordError(error && error.stack ? error.stack : error);
  }
})();
