// The lock board's page script (nestjs-redis-lock/board): polls the state endpoint and renders it.
// Every value goes into the page as text (textContent, attributes set one by one), never as HTML:
// lock names and owners come from requests.
(function () {
  'use strict';
  var body = document.body;
  var base = body.dataset.base;
  var refreshMs = Number(body.dataset.refreshMs) || 1000;
  var last = null;
  var timer = null;

  function el(tag, text, className) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function ms(value) {
    if (value === null || value === undefined) return '–';
    if (value < 1000) return Math.round(value) + ' ms';
    if (value < 60000) return (value / 1000).toFixed(1) + ' s';
    return Math.floor(value / 60000) + ' min ' + Math.round((value % 60000) / 1000) + ' s';
  }

  function time(epochMs) {
    return new Date(epochMs).toLocaleTimeString();
  }

  function row(cells) {
    var tr = document.createElement('tr');
    cells.forEach(function (cell) {
      var td = document.createElement('td');
      if (cell instanceof Node) td.appendChild(cell);
      else td.textContent = cell === undefined || cell === null ? '' : String(cell);
      tr.appendChild(td);
    });
    return tr;
  }

  function holdersText(lock) {
    if (lock.holders.length === 0) return lock.state === 'waiting' ? 'nobody (waiters only)' : '–';
    var shown = lock.holders.map(function (h) {
      return (h.side ? h.side + ': ' : '') + h.owner;
    });
    if (lock.holderCount > lock.holders.length) shown.push('… ' + (lock.holderCount - lock.holders.length) + ' more');
    return shown.join(', ');
  }

  function holdsText(lock) {
    if (lock.kind === 'semaphore') {
      var limit = lock.permits.storedLimit === null ? 'limit per client' : 'of ' + lock.permits.storedLimit;
      return lock.permits.inUse + ' permits (' + limit + ')';
    }
    if (lock.state === 'handing-over') return 'handing over';
    return (
      lock.holders
        .map(function (h) {
          return h.count;
        })
        .join(', ') || '–'
    );
  }

  function waitingText(lock) {
    if (lock.kind === 'fair' || lock.kind === 'read-write')
      return lock.queueCount ? lock.queueCount + ' in queue' : '–';
    return lock.waitingCount ? lock.waitingCount + ' process' + (lock.waitingCount > 1 ? 'es' : '') : '–';
  }

  function matches(lock, query) {
    if (!query) return true;
    var q = query.toLowerCase();
    return lock.name.toLowerCase().indexOf(q) >= 0 || (lock.label || '').toLowerCase().indexOf(q) >= 0;
  }

  function details(lock) {
    var box = el('div', null, 'details');
    if (lock.queue.length > 0) {
      box.appendChild(el('div', lock.kind === 'fair' ? 'Queue, in order:' : 'Waiting writers:', 'muted'));
      var ol = el('ol', null, 'queue');
      lock.queue.forEach(function (w) {
        var li = el(
          'li',
          w.owner + (w.waiterId ? ' (wait ' + w.waiterId + ')' : '') + ' — deadline in ' + ms(w.expiresInMs),
        );
        li.dataset.owner = w.owner;
        ol.appendChild(li);
      });
      box.appendChild(ol);
    }
    if (lock.kind === 'semaphore' && lock.holders.length > 0) {
      box.appendChild(el('div', 'Permits held:', 'muted'));
      var ul = el('ul', null, 'permits');
      lock.holders.forEach(function (h) {
        ul.appendChild(el('li', h.count + ' × ' + h.owner + ' — expires in ' + ms(h.remainingLeaseMs)));
      });
      box.appendChild(ul);
    }
    if (lock.waitingClients.length > 0) {
      box.appendChild(
        el('div', 'Waiting processes (client ids), longest first: ' + lock.waitingClients.join(', '), 'muted'),
      );
    }
    return box;
  }

  function unlockButton(lock) {
    var button = el('button', 'Force unlock', 'danger');
    button.type = 'button';
    button.addEventListener('click', function () {
      var holder = lock.holders[0].owner;
      var all = lock.holders
        .map(function (h) {
          return h.owner;
        })
        .join(', ');
      if (
        !window.confirm(
          'Force-unlock "' + lock.name + '" held by ' + all + '?\nIts holder keeps running without the lock.',
        )
      )
        return;
      button.disabled = true;
      fetch(base + '/force-unlock', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-lock-board': '1' },
        body: JSON.stringify({ name: lock.name, kind: lock.kind, holder: holder }),
        credentials: 'same-origin',
      })
        .then(function (response) {
          return response.json().then(function (answer) {
            if (!response.ok) showError('Force-unlock refused: ' + (answer.message || response.status));
            refresh();
          });
        })
        .catch(function (error) {
          showError('Force-unlock failed: ' + error.message);
        });
    });
    return button;
  }

  function renderLocks(state) {
    var query = document.getElementById('search').value.trim();
    var tbody = document.querySelector('#locks tbody');
    tbody.replaceChildren();
    var shown = state.locks.filter(function (lock) {
      return matches(lock, query);
    });
    shown.forEach(function (lock) {
      var name = el('span', lock.name, 'name');
      var nameCell = el('div');
      nameCell.appendChild(name);
      if (lock.label) nameCell.appendChild(el('div', lock.label, 'muted label'));
      var action = lock.canForceUnlock ? unlockButton(lock) : el('span');
      var tr = row([
        nameCell,
        el('span', lock.kind, 'kind kind-' + lock.kind),
        holdersText(lock),
        holdsText(lock),
        ms(lock.remainingLeaseMs),
        lock.fencingToken === null ? '–' : lock.fencingToken,
        waitingText(lock),
        action,
      ]);
      tr.className = 'lock';
      tr.dataset.lockName = lock.name;
      tbody.appendChild(tr);
      if (lock.queue.length > 0 || lock.waitingClients.length > 0 || lock.kind === 'semaphore') {
        var more = document.createElement('tr');
        more.className = 'more';
        var td = document.createElement('td');
        td.colSpan = 8;
        td.appendChild(details(lock));
        more.appendChild(td);
        tbody.appendChild(more);
      }
    });
    var none = document.getElementById('no-locks');
    none.hidden = shown.length > 0;
    none.textContent =
      state.locks.length === 0 ? 'No lock is held and nobody waits.' : 'No lock matches "' + query + '".';
  }

  function sparkline(values) {
    var ns = 'http://www.w3.org/2000/svg';
    var width = 120;
    var height = 24;
    var svg = document.createElementNS(ns, 'svg');
    svg.setAttribute('width', width);
    svg.setAttribute('height', height);
    svg.setAttribute('viewBox', '0 0 ' + width + ' ' + height);
    svg.setAttribute('class', 'spark');
    var max = Math.max.apply(null, values.concat([1]));
    var step = width / values.length;
    values.forEach(function (value, i) {
      var h = value === 0 ? 0 : Math.max(1, (value / max) * height);
      var bar = document.createElementNS(ns, 'rect');
      bar.setAttribute('x', (i * step).toFixed(1));
      bar.setAttribute('y', (height - h).toFixed(1));
      bar.setAttribute('width', Math.max(1, step - 1).toFixed(1));
      bar.setAttribute('height', h.toFixed(1));
      svg.appendChild(bar);
    });
    var title = document.createElementNS(ns, 'title');
    title.textContent = values.join(', ');
    svg.appendChild(title);
    return svg;
  }

  function renderLabels(state) {
    document.getElementById('window').textContent =
      'last ' + state.statsWindowMs / 60000 + ' min, bars of ' + state.statsBucketMs / 1000 + ' s, this process only';
    var tbody = document.querySelector('#labels tbody');
    tbody.replaceChildren();
    state.labels.forEach(function (l) {
      tbody.appendChild(
        row([
          l.label,
          l.acquisitions,
          sparkline(l.perBucket),
          ms(l.waitP50),
          ms(l.waitP99),
          ms(l.holdP50),
          ms(l.holdP99),
        ]),
      );
    });
    if (state.labels.length === 0) tbody.appendChild(row(['No acquisition in this process lately.']));
  }

  function renderEvents(state) {
    var tbody = document.querySelector('#events tbody');
    tbody.replaceChildren();
    state.events.forEach(function (e) {
      var detail = [
        e.reason,
        e.waitedMs !== undefined ? 'waited ' + ms(e.waitedMs) : '',
        e.heldMs !== undefined ? 'held ' + ms(e.heldMs) : '',
      ]
        .filter(Boolean)
        .join('; ');
      var tr = row([time(e.at), el('span', e.type, 'event event-' + e.type), e.name, e.kind, e.owner, e.label, detail]);
      tr.dataset.event = e.type;
      tbody.appendChild(tr);
    });
    if (state.events.length === 0) tbody.appendChild(row(['No event yet.']));
  }

  function showError(text) {
    var box = document.getElementById('error');
    box.textContent = text || '';
    box.hidden = !text;
  }

  function render(state) {
    last = state;
    var masters = state.cluster ? state.masters + ' cluster masters' : 'one master';
    var parts = [
      'Prefix ' + state.prefix,
      masters,
      state.locks.length + ' of ' + state.namesKnown + ' locks shown',
      'at most ' + state.maxLocks + ' read and ' + state.scanPerRefresh + ' keys scanned per refresh',
      'updated ' + time(state.at),
      state.forceUnlock ? 'force-unlock on' : 'read-only',
    ];
    document.getElementById('summary').textContent = parts.join(' · ');
    showError(state.error);
    renderLocks(state);
    renderLabels(state);
    renderEvents(state);
  }

  function refresh() {
    clearTimeout(timer);
    fetch(base + '/state', { credentials: 'same-origin', headers: { accept: 'application/json' } })
      .then(function (response) {
        if (!response.ok) throw new Error('the board answered ' + response.status);
        return response.json();
      })
      .then(render)
      .catch(function (error) {
        showError('Could not refresh: ' + error.message);
      })
      .then(schedule);
  }

  function schedule() {
    clearTimeout(timer);
    // A hidden tab does not poll: a board left open in the background costs nothing.
    if (!document.hidden) timer = setTimeout(refresh, refreshMs);
  }

  document.addEventListener('visibilitychange', function () {
    if (!document.hidden) refresh();
  });
  document.getElementById('search').addEventListener('input', function () {
    if (last) renderLocks(last);
  });
  refresh();
})();
