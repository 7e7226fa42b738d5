/* report_html.js - draws the cumemtrace report embedded in this page.
 *
 * The JSON report (docs/report.schema.json) sits in the element
 * #report-data; this script reads it and builds the page: summary figures,
 * live bytes over time (from the event timeline when it was recorded), an
 * icicle graph of live device memory by stack at exit and at the peak, and
 * the tables. Plain DOM and SVG, no libraries, nothing fetched.
 *
 * For tests and tools: script errors are counted in the body's
 * data-script-errors attribute (and listed in #errors); data-rendered="1"
 * says the page was drawn; every summary figure carries its exact value in
 * a data-value attribute. Compiled into the library by scripts/embed.cmake. */
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

  /* Kinds whose bytes occupy device memory (src/record/kinds.c). */
  var DEVICE_MEMORY_KINDS = { device: true, stream_ordered: true, vmm_physical: true, array: true };
  var KIND_COLORS = {
    device: '#1e88e5', stream_ordered: '#43a047', managed: '#fb8c00', pinned_host: '#8e24aa',
    registered_host: '#6d4c41', vmm_physical: '#00897b', vmm_mapping: '#90a4ae',
    vmm_reservation: '#cfd8dc', array: '#f4511e', 'device memory': '#263238'
  };

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

  function svgElement(tag, attributes) {
    var node = document.createElementNS('http://www.w3.org/2000/svg', tag);
    var name;
    for (name in attributes || {}) {
      node.setAttribute(name, attributes[name]);
    }
    return node;
  }

  /* "1.50 GiB", as src/output.c's format_bytes. */
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
    return (s < 10 ? s.toFixed(2) : s < 100 ? s.toFixed(1) : s.toFixed(0)) + ' s';
  }

  function basename(path) {
    return path ? path.slice(path.lastIndexOf('/') + 1) : '';
  }

  function deviceName(device) {
    return device === null || device === undefined ? 'no device' : 'device ' + device;
  }

  /* ---- the report's stacks ------------------------------------------ */

  function Stacks(report) {
    var frames = report.frames || [];
    var byId = {};
    (report.stacks || []).forEach(function (stack) {
      byId[stack.id] = stack;
    });

    function frameLabel(id) {
      var f = frames[id];
      if (!f) {
        return '?';
      }
      if (f.python) {
        return (f.function || '?') + ' (' + basename(f.file) + ':' + f.line + ')';
      }
      if (f.function) {
        return f.function;
      }
      return basename(f.module) + '+0x' + Number(f.module_offset || 0).toString(16);
    }

    function frameDetail(id) {
      var f = frames[id];
      if (!f) {
        return '?';
      }
      var where = f.file ? f.file + ':' + f.line : basename(f.module) + '+0x' +
        Number(f.module_offset || 0).toString(16);
      return (f.function || '??') + '  ' + where;
    }

    return {
      /* Outermost first, for flame graphs; the frames the report hides
       * (stack.hidden, src/report/frames.h) left out unless report.tracer.all_frames. */
      path: function (stackId) {
        var stack = byId[stackId];
        if (!stack || stack.frames.length === 0) {
          return ['[no stack]'];
        }
        var hidden = {};
        if (!(report.tracer || {}).all_frames) {
          (stack.hidden || []).forEach(function (i) {
            hidden[i] = true;
          });
        }
        return stack.frames.map(function (id, i) {
          return hidden[i] ? null : frameLabel(id);
        }).filter(function (name) {
          return name !== null;
        }).reverse();
      },
      /* The stack's site: its innermost frame in the program's own code. */
      site: function (stackId) {
        var stack = byId[stackId];
        if (!stack || stack.frames.length === 0) {
          return '[no stack]';
        }
        return frameLabel(stack.frames[stack.site === null || stack.site === undefined ? 0 : stack.site]);
      },
      detail: function (stackId) {
        var stack = byId[stackId];
        return stack ? stack.frames.map(frameDetail).join('\n') : '(no stack recorded)';
      }
    };
  }

  /* ---- memory over time ---------------------------------------------- */

  function counterBytes(report, device, kind) {
    var devices = report.devices || [];
    for (var i = 0; i < devices.length; i++) {
      if (devices[i].device === device) {
        var c = devices[i].counters[kind];
        return c ? c.allocated_bytes.current : 0;
      }
    }
    return 0;
  }

  /* Replays the timeline into step series per "device/kind" and per device
   * for all device memory. Live bytes before the first recorded event are
   * the counters at the end minus every recorded change. */
  function buildSeries(report) {
    var timeline = report.timeline;
    var events = timeline.events;
    var series = {};
    var order = [];

    function key(device, kind) {
      return deviceName(device) + ': ' + kind;
    }

    function ensure(device, kind) {
      var k = key(device, kind);
      if (!series[k]) {
        series[k] = { name: k, device: device, kind: kind, start: counterBytes(report, device, kind === 'device memory' ? 'device_memory' : kind), points: [] };
        order.push(k);
      }
      return series[k];
    }

    events.forEach(function (e) {
      var delta = e[1] === 'alloc' ? e[3] : e[1] === 'free' || e[1] === 'free_implicit' ? -e[3] : 0;
      if (delta === 0) {
        return;
      }
      ensure(e[4], e[5]).start -= delta;
      if (DEVICE_MEMORY_KINDS[e[5]]) {
        ensure(e[4], 'device memory').start -= delta;
      }
    });
    var first = events.length ? events[0][0] : 0;
    order.forEach(function (k) {
      series[k].points.push([first, series[k].start]);
      series[k].value = series[k].start;
    });
    events.forEach(function (e) {
      var delta = e[1] === 'alloc' ? e[3] : e[1] === 'free' || e[1] === 'free_implicit' ? -e[3] : 0;
      if (delta === 0) {
        return;
      }
      var s = series[key(e[4], e[5])];
      s.value += delta;
      s.points.push([e[0], s.value]);
      if (DEVICE_MEMORY_KINDS[e[5]]) {
        var total = series[key(e[4], 'device memory')];
        total.value += delta;
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
   * counters; or, for a report without it, the marks' device bytes. */
  function seriesFromSamples(report) {
    var endUs = Math.round(report.process.duration_s * 1e6);
    var list = [];
    var totals = {};
    if (report.series) {
      report.series.tracks.forEach(function (track) {
        var points = track.points.map(function (p) {
          return [p[0] * 1000, p[1]];
        });
        points.push([endUs, counterBytes(report, track.device, track.kind)]);
        list.push({ name: deviceName(track.device) + ': ' + track.kind, device: track.device, kind: track.kind, points: points });
        if (DEVICE_MEMORY_KINDS[track.kind]) {
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
        list.push({ name: deviceName(Number(device)) + ': device memory', device: Number(device), kind: 'device memory', points: totals[device] });
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
      list.push({ name: 'device memory, all devices (at marks and at the end)', kind: 'device memory', points: points });
    }
    return { list: list, end: endUs };
  }

  /* The moment device memory (all devices) was highest in the timeline:
   * the index of the last event at that moment, and the bytes then. */
  function findPeak(report) {
    var events = report.timeline.events;
    var total = 0;
    var devices = report.devices || [];
    devices.forEach(function (d) {
      total += d.counters.device_memory.allocated_bytes.current;
    });
    events.forEach(function (e) {
      if (DEVICE_MEMORY_KINDS[e[5]]) {
        total -= e[1] === 'alloc' ? e[3] : e[1] === 'free' || e[1] === 'free_implicit' ? -e[3] : 0;
      }
    });
    var best = { index: -1, bytes: total, time: events.length ? events[0][0] : 0 };
    events.forEach(function (e, i) {
      if (DEVICE_MEMORY_KINDS[e[5]]) {
        total += e[1] === 'alloc' ? e[3] : e[1] === 'free' || e[1] === 'free_implicit' ? -e[3] : 0;
        if (total > best.bytes) {
          best = { index: i, bytes: total, time: e[0] };
        }
      }
    });
    return best;
  }

  function drawChart(report, container) {
    var width = 1000;
    var height = 300;
    var left = 78;
    var right = 10;
    var top = 10;
    var bottom = 28;
    var data;
    var oomTimes = [];
    var markTimes = [];
    if (report.timeline) {
      data = buildSeries(report);
      report.timeline.events.forEach(function (e) {
        if (e[1] === 'oom') {
          oomTimes.push(e[0]);
        } else if (e[1] === 'mark') {
          markTimes.push([e[0], e[7] || '']);
        }
      });
    } else {
      data = seriesFromSamples(report);
      ((report.failures || {}).recent || []).forEach(function (f) {
        if (f.oom) {
          oomTimes.push(f.time_ms * 1000);
        }
      });
      ((report.marks || {}).recent || []).forEach(function (m) {
        markTimes.push([m.time_ms * 1000, m.label]);
      });
      container.appendChild(element('p', { 'class': 'note', id: 'series-info', 'data-samples': String(report.series ? report.series.samples : 0) }, [
        'No event timeline in this report (CUMEMTRACE_EVENTS=0): the lines join the growth samples ' +
        '(every CUMEMTRACE_SAMPLE_MS at an allocation, or at marks) and the end. ' +
        'Run with CUMEMTRACE_EVENTS=1M to see every allocation and free.']));
    }
    var peaks = [];
    (report.devices || []).forEach(function (d) {
      var peak = d.counters.device_memory.allocated_bytes.peak;
      if (peak > 0) {
        peaks.push([d.device, peak]);
      }
    });
    var maxBytes = 1;
    data.list.forEach(function (s) {
      s.points.forEach(function (p) {
        maxBytes = Math.max(maxBytes, p[1]);
      });
    });
    peaks.forEach(function (p) {
      maxBytes = Math.max(maxBytes, p[1]);
    });
    maxBytes *= 1.05;
    var endTime = Math.max(data.end, 1);
    function x(t) {
      return left + (width - left - right) * t / endTime;
    }
    function y(b) {
      return top + (height - top - bottom) * (1 - b / maxBytes);
    }
    var svg = svgElement('svg', { viewBox: '0 0 ' + width + ' ' + height, preserveAspectRatio: 'none', id: 'memory-chart' });
    for (var i = 0; i <= 4; i++) {
      var b = maxBytes * i / 4;
      svg.appendChild(svgElement('line', { 'class': 'grid', x1: left, x2: width - right, y1: y(b), y2: y(b) }));
      var label = svgElement('text', { x: left - 6, y: y(b) + 4, 'text-anchor': 'end' });
      label.textContent = formatBytes(Math.round(b));
      svg.appendChild(label);
    }
    for (i = 0; i <= 5; i++) {
      var t = endTime * i / 5;
      var tick = svgElement('text', { x: x(t), y: height - 8, 'text-anchor': i === 0 ? 'start' : i === 5 ? 'end' : 'middle' });
      tick.textContent = formatSeconds(t);
      svg.appendChild(tick);
    }
    svg.appendChild(svgElement('line', { 'class': 'axis', x1: left, x2: left, y1: top, y2: height - bottom }));
    svg.appendChild(svgElement('line', { 'class': 'axis', x1: left, x2: width - right, y1: height - bottom, y2: height - bottom }));

    peaks.forEach(function (p) {
      svg.appendChild(svgElement('line', { 'class': 'peak', x1: left, x2: width - right, y1: y(p[1]), y2: y(p[1]) }));
      var text = svgElement('text', { x: width - right - 4, y: y(p[1]) - 4, 'text-anchor': 'end' });
      text.textContent = 'peak ' + deviceName(p[0]) + ': ' + formatBytes(p[1]);
      svg.appendChild(text);
    });
    markTimes.forEach(function (m) {
      var line = svgElement('line', { 'class': 'mark', x1: x(m[0]), x2: x(m[0]), y1: top, y2: height - bottom });
      var title = svgElement('title');
      title.textContent = 'mark: ' + m[1] + ' at ' + formatSeconds(m[0]);
      line.appendChild(title);
      svg.appendChild(line);
    });
    oomTimes.forEach(function (t) {
      var line = svgElement('line', { 'class': 'oom', x1: x(t), x2: x(t), y1: top, y2: height - bottom });
      var title = svgElement('title');
      title.textContent = 'out of memory at ' + formatSeconds(t);
      line.appendChild(title);
      svg.appendChild(line);
    });

    /* Step lines, at most a few points per pixel column: the highest and
     * the last value of each column. */
    var legend = element('div', { 'class': 'legend' });
    data.list.forEach(function (s) {
      var color = KIND_COLORS[s.kind] || '#555';
      var path = '';
      var column = null;
      var columnMax = 0;
      var last = null;
      function flush() {
        if (column !== null) {
          path += ' V' + y(columnMax).toFixed(1) + ' V' + y(last).toFixed(1);
        }
      }
      s.points.forEach(function (p, index) {
        var px = Math.round(x(p[0]));
        if (index === 0) {
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
      var attributes = { d: path, fill: 'none', stroke: color, 'stroke-width': s.kind === 'device memory' ? 2.5 : 1.5 };
      if (s.kind === 'device memory') {
        attributes['stroke-opacity'] = '0.5';
      }
      var line = svgElement('path', attributes);
      var title = svgElement('title');
      title.textContent = s.name;
      line.appendChild(title);
      svg.appendChild(line);
      legend.appendChild(element('span', {}, [element('i', { style: 'background:' + color }), s.name]));
    });
    if (report.timeline) {
      var peak = findPeak(report);
      if (peak.index >= 0) {
        var dot = svgElement('circle', { cx: x(peak.time), cy: y(peak.bytes), r: 4, fill: '#6a1b9a' });
        var dotTitle = svgElement('title');
        dotTitle.textContent = 'highest device memory in the timeline: ' + formatBytes(peak.bytes) + ' at ' + formatSeconds(peak.time);
        dot.appendChild(dotTitle);
        svg.appendChild(dot);
      }
    }
    container.appendChild(svg);
    if (oomTimes.length) {
      legend.appendChild(element('span', {}, [element('i', { style: 'background:#c62828' }), 'out of memory (' + oomTimes.length + ')']));
    }
    if (markTimes.length) {
      legend.appendChild(element('span', {}, [element('i', { style: 'background:#777' }), 'marks (' + markTimes.length + ')']));
    }
    container.appendChild(legend);
  }

  /* ---- icicle graph --------------------------------------------------- */

  function buildTree(entries, stacks) {
    var root = { name: 'all', value: 0, children: {} };
    entries.forEach(function (entry) {
      if (entry.bytes <= 0) {
        return;
      }
      var node = root;
      root.value += entry.bytes;
      stacks.path(entry.stack).forEach(function (name) {
        if (!node.children[name]) {
          node.children[name] = { name: name, value: 0, children: {} };
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

  function drawIcicle(container, root, id) {
    var box = element('div', { 'class': 'icicle', id: id, 'data-total': String(root.value) });
    var rowHeight = 18;
    var depth = 0;
    function place(node, level, start) {
      var fraction = node.value / root.value;
      if (fraction < 0.002) {
        return;
      }
      depth = Math.max(depth, level + 1);
      var label = level === 0 ? 'all: ' + formatBytes(node.value) : node.name;
      var div = element('div', {
        style: 'left:' + (start * 100) + '%;width:' + (fraction * 100) + '%;top:' + (level * rowHeight) + 'px;background:' + (level === 0 ? '#cfd8dc' : colorFor(node.name)),
        title: node.name + '\n' + formatBytes(node.value) + ' (' + (fraction * 100).toFixed(1) + '%)'
      }, [label]);
      box.appendChild(div);
      var offset = start;
      Object.keys(node.children).map(function (k) {
        return node.children[k];
      }).sort(function (a, b) {
        return b.value - a.value;
      }).forEach(function (child) {
        place(child, level + 1, offset);
        offset += child.value / root.value;
      });
    }
    if (root.value > 0) {
      place(root, 0, 0);
    } else {
      box.appendChild(element('p', { 'class': 'note' }, ['No device memory live here.']));
      depth = 2;
    }
    box.style.height = (depth * rowHeight + 2) + 'px';
    container.appendChild(box);
  }

  function liveByStack(report) {
    var bytes = {};
    (report.live || []).forEach(function (group) {
      if (DEVICE_MEMORY_KINDS[group.kind]) {
        bytes[group.stack] = (bytes[group.stack] || 0) + group.bytes;
      }
    });
    return bytes;
  }

  function toEntries(bytes) {
    return Object.keys(bytes).map(function (stack) {
      return { stack: Number(stack), bytes: bytes[stack] };
    });
  }

  /* At the peak of the timeline: live at exit, minus every change after the
   * peak, stack by stack. Exact: every change after it is in the timeline. */
  function peakByStack(report, peak) {
    var bytes = liveByStack(report);
    var events = report.timeline.events;
    for (var i = events.length - 1; i > peak.index; i--) {
      var e = events[i];
      if (!DEVICE_MEMORY_KINDS[e[5]]) {
        continue;
      }
      var delta = e[1] === 'alloc' ? e[3] : e[1] === 'free' || e[1] === 'free_implicit' ? -e[3] : 0;
      bytes[e[6]] = (bytes[e[6]] || 0) - delta;
    }
    return bytes;
  }

  /* ---- tables ---------------------------------------------------------- */

  function table(headers, rows, id) {
    var numeric = headers.map(function (h) {
      return /^#$|bytes|blocks|rate|current|peak|allocated|ooms|failures/.test(h);
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

  function stackCell(stacks, stackId) {
    return element('details', {}, [element('summary', {}, [stacks.site(stackId)]),
      element('pre', {}, [stacks.detail(stackId)])]);
  }

  function card(id, label, value, text, bad) {
    return element('div', { 'class': 'card' + (bad ? ' bad' : ''), id: id, 'data-value': String(value) }, [
      element('div', { 'class': 'label' }, [label]), element('div', { 'class': 'value' }, [text])]);
  }

  /* ---- the page ---------------------------------------------------------- */

  function render(report) {
    var stacks = Stacks(report);
    var app = document.getElementById('app');
    app.textContent = '';
    var argv = (report.process.argv || []).join(' ');
    app.appendChild(element('header', {}, [
      element('h1', {}, ['cumemtrace ' + report.reason + ' report: ' + (argv || 'pid ' + report.process.pid)]),
      element('div', { 'class': 'meta' }, ['pid ' + report.process.pid + ' on ' + report.process.host + ', ' +
        report.process.duration_s.toFixed(1) + ' s after start, written ' +
        new Date(report.process.time * 1000).toISOString() + ' by cumemtrace ' + report.tracer.version])]));
    var main = element('main');
    app.appendChild(main);

    var liveDevice = 0;
    var peakDevice = 0;
    var ooms = 0;
    (report.devices || []).forEach(function (d) {
      liveDevice += d.counters.device_memory.allocated_bytes.current;
      peakDevice = Math.max(peakDevice, d.counters.device_memory.allocated_bytes.peak);
      Object.keys(d.counters).forEach(function (kind) {
        if (kind !== 'device_memory') {
          ooms += d.counters[kind].num_ooms;
        }
      });
    });
    var leakedBytes = 0;
    var leakedBlocks = 0;
    var sites = {};
    (report.live || []).forEach(function (g) {
      leakedBytes += g.bytes;
      leakedBlocks += g.blocks;
      sites[g.stack] = true;
    });
    var leakedSites = Object.keys(sites).length;
    var growing = report.growth ? report.growth.growing : [];
    var verdict = (report.fragmentation || {}).verdict || 'none';
    var live = report.reason === 'exit' ? 'Leaked (live at exit)' : 'Live now';
    main.appendChild(element('section', {}, [element('div', { 'class': 'cards' }, [
      card('live-device-bytes', 'Device memory live', liveDevice, formatBytes(liveDevice)),
      card('peak-device-bytes', 'Peak device memory (one device)', peakDevice, formatBytes(peakDevice)),
      card('leaked-bytes', live + ', all kinds', leakedBytes, formatBytes(leakedBytes), report.reason === 'exit' && leakedBytes > 0),
      card('leaked-blocks', 'Live blocks', leakedBlocks, String(leakedBlocks)),
      card('leaked-sites', 'Allocation sites holding them', leakedSites, String(leakedSites), report.reason === 'exit' && leakedSites > 0),
      card('growing-sites', 'Growing sites (leak suspects)', growing.length, String(growing.length), growing.length > 0),
      card('ooms', 'Out-of-memory failures', ooms, String(ooms), ooms > 0),
      card('fragmentation-verdict', 'Fragmentation', verdict, verdict, verdict !== 'none')
    ])]));

    if (report.event && report.event.type === 'oom') {
      var e = report.event;
      main.appendChild(element('section', { id: 'oom-event' }, [element('h2', {}, ['Out of memory']),
        element('p', {}, [formatBytes(e.size) + ' of ' + e.kind + ' memory via ' + e.api + ' on ' + deviceName(e.device) +
          ' failed; the driver had ' + (e.driver_free === null ? 'unknown' : formatBytes(e.driver_free)) +
          ' free: ' + e.verdict + '. Retry: ' + e.retry + '.']),
        stackCell(stacks, e.stack)]));
    }

    var chart = element('section', { 'class': 'chart', id: 'chart-section' }, [element('h2', {}, ['Live bytes over time, per device and kind'])]);
    if (report.timeline) {
      chart.appendChild(element('p', { 'class': 'note', id: 'timeline-info', 'data-events': String(report.timeline.events.length), 'data-dropped': String(report.timeline.dropped) }, [
        report.timeline.events.length + ' events recorded' + (report.timeline.dropped ? ', the oldest ' + report.timeline.dropped + ' dropped (ring of ' + report.timeline.capacity + ')' : '') +
        '. The thick grey line is all device memory of a device; dashed lines: the peaks; red: out of memory; grey dashes: marks.']));
    }
    main.appendChild(chart);
    drawChart(report, chart);

    var flames = element('section', { id: 'flame-section' }, [element('h2', {}, ['Live device memory by stack (outermost frame on top)'])]);
    main.appendChild(flames);
    flames.appendChild(element('h3', {}, ['At the end of the run' + (report.reason === 'exit' ? ' (leaked)' : '')]));
    drawIcicle(flames, buildTree(toEntries(liveByStack(report)), stacks), 'icicle-exit');
    if (report.timeline && report.timeline.events.length) {
      var peak = findPeak(report);
      var title = 'At the highest point of the timeline: ' + formatBytes(peak.bytes) + ' of device memory (all devices) at ' + formatSeconds(peak.time);
      if (peak.bytes < peakDevice && report.timeline.dropped) {
        title += '; the run went higher before the oldest recorded event';
      }
      flames.appendChild(element('h3', {}, [title]));
      drawIcicle(flames, buildTree(toEntries(peakByStack(report, peak)), stacks), 'icicle-peak');
    } else {
      flames.appendChild(element('h3', {}, ['Each allocation site at its own highest (sites did not necessarily peak together; no timeline recorded)']));
      drawIcicle(flames, buildTree((report.stacks || []).map(function (s) {
        return { stack: s.id, bytes: s.peak_live_bytes };
      }), stacks), 'icicle-site-peaks');
    }

    var leakRows = (report.live || []).slice(0, 100).map(function (g, i) {
      return [i + 1, formatBytes(g.bytes), g.blocks, g.kind, g.api, deviceName(g.device), formatSeconds(g.oldest_ms * 1000), stackCell(stacks, g.stack)];
    });
    main.appendChild(element('section', { id: 'leaks' }, [element('h2', {}, [live + ' by allocation site' + ((report.live || []).length > 100 ? ' (first 100)' : '')]),
      leakRows.length ? table(['#', 'bytes', 'blocks', 'kind', 'api', 'device', 'oldest from', 'site'], leakRows, 'leak-table')
        : element('p', {}, ['Nothing live.'])]));

    var growRows = growing.map(function (g, i) {
      var rate = report.growth.mode === 'marks' ? formatBytes(g.rate) + ' per mark' : formatBytes(g.rate) + '/s';
      return [i + 1, formatBytes(g.live_bytes), rate, g.rises + ' of ' + g.samples_since_first, stackCell(stacks, g.stack)];
    });
    main.appendChild(element('section', { id: 'growing' }, [element('h2', {}, ['Growing (leak suspects)']),
      growRows.length ? table(['#', 'live bytes', 'rate', 'rose at samples', 'site'], growRows, 'growing-table')
        : element('p', {}, [report.growth ? 'None of ' + report.growth.samples + ' samples showed a site that keeps growing.' : 'Not known (no samples in this report).'])]));

    var counterRows = [];
    (report.devices || []).forEach(function (d) {
      Object.keys(d.counters).forEach(function (kind) {
        var c = d.counters[kind];
        if (c.allocation.allocated === 0 && c.num_alloc_failures === 0 && kind !== 'device_memory') {
          return;
        }
        counterRows.push([deviceName(d.device), kind, formatBytes(c.allocated_bytes.current), formatBytes(c.allocated_bytes.peak),
          formatBytes(c.allocated_bytes.allocated), c.allocation.current, c.allocation.allocated, c.num_alloc_failures, c.num_ooms]);
      });
      if (d.driver_total !== null) {
        counterRows.push([deviceName(d.device), 'driver', formatBytes(d.driver_total - d.driver_free) + ' used', formatBytes(d.driver_total) + ' total',
          'untracked ' + formatBytes(d.untracked_bytes), '', '', '', '']);
      }
    });
    main.appendChild(element('section', { id: 'counters' }, [element('h2', {}, ['Counters (as in torch.cuda.memory_stats())']),
      table(['device', 'kind', 'current', 'peak', 'allocated', 'blocks current', 'blocks allocated', 'failures', 'ooms'], counterRows, 'counter-table')]));

    var f = report.fragmentation || {};
    main.appendChild(element('section', { id: 'fragmentation' }, [element('h2', {}, ['Fragmentation and idle reserves']),
      element('p', {}, ['Verdict: ', element('span', { 'class': verdict === 'none' ? 'verdict-none' : 'verdict-bad' }, [verdict])]),
      table(['what', 'bytes'], [
        ['stream-ordered pools: reserved', formatBytes(f.pool_reserved_bytes || 0)],
        ['stream-ordered pools: used', formatBytes(f.pool_used_bytes || 0)],
        ['stream-ordered pools: idle', formatBytes(f.pool_idle_bytes || 0)],
        ['VMM address space reserved', formatBytes(f.vmm_reserved_bytes || 0)],
        ['VMM mapped', formatBytes(f.vmm_mapped_bytes || 0)],
        ['VMM reserved, not mapped', formatBytes(f.vmm_unmapped_bytes || 0)]])]));

    var failures = (report.failures || {}).recent || [];
    if (failures.length) {
      main.appendChild(element('section', { id: 'failures' }, [element('h2', {}, ['Failed allocations (' + report.failures.total + ')']),
        table(['#', 'bytes', 'kind', 'api', 'device', 'oom', 'at', 'site'], failures.map(function (x, i) {
          return [i + 1, formatBytes(x.size), x.kind, x.api, deviceName(x.device), x.oom ? 'yes' : 'no', formatSeconds(x.time_ms * 1000), stackCell(stacks, x.stack)];
        }))]));
    }
  }

  try {
    render(JSON.parse(document.getElementById('report-data').textContent));
    document.body.setAttribute('data-rendered', '1');
  } catch (error) {
    recordError(error && error.stack ? error.stack : error);
  }
})();
