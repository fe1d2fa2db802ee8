// The dashboard's only script. Without it every page still works: forms
// post without a confirmation (the server still requires the POST and
// its token) and pages show what they showed when loaded.
(function () {
  'use strict';

  // Ask before an action: forms with data-confirm.
  document.addEventListener('submit', function (e) {
    var msg = e.target.getAttribute('data-confirm');
    if (msg && !window.confirm(msg)) {
      e.preventDefault();
    }
  });

  // Live pages: every few seconds the page is fetched again and its
  // [data-live] regions brought up to date. Elements with data-k are
  // updated in place (forms and inputs are left alone); when the set of
  // data-k and data-s values differs (a queue or worker came or went) the
  // whole region is replaced.
  var every = Number(document.body.getAttribute('data-live-refresh'));
  if (!every) {
    return;
  }
  var status = document.getElementById('live-status');
  var refreshes = 0;

  function signature(root) {
    var keys = [];
    root.querySelectorAll('[data-k],[data-s]').forEach(function (el) {
      keys.push((el.getAttribute('data-k') || '') + '\u0000' + (el.getAttribute('data-s') || ''));
    });
    return keys.join('\u0001');
  }

  function apply(doc) {
    document.querySelectorAll('[data-live]').forEach(function (region) {
      var fresh = region.id && doc.getElementById(region.id);
      if (!fresh) {
        return;
      }
      if (signature(region) !== signature(fresh)) {
        region.innerHTML = fresh.innerHTML;
        return;
      }
      var next = {};
      fresh.querySelectorAll('[data-k]').forEach(function (el) {
        next[el.getAttribute('data-k')] = el;
      });
      region.querySelectorAll('[data-k]').forEach(function (el) {
        var n = next[el.getAttribute('data-k')];
        if (n && n.innerHTML !== el.innerHTML) {
          el.innerHTML = n.innerHTML;
        }
      });
    });
  }

  function tick() {
    if (document.hidden) {
      window.setTimeout(tick, every);
      return;
    }
    fetch(window.location.href, {credentials: 'same-origin', cache: 'no-store', headers: {'Accept': 'text/html'}})
      .then(function (r) {
        if (!r.ok) {
          throw new Error('HTTP ' + r.status);
        }
        return r.text();
      })
      .then(function (html) {
        apply(new DOMParser().parseFromString(html, 'text/html'));
        refreshes++;
        document.body.setAttribute('data-refreshes', String(refreshes));
        if (status) {
          status.textContent = 'Refreshes every ' + every / 1000 + ' s; updated ' + new Date().toISOString().slice(11, 19) + ' UTC.';
          status.classList.remove('stale');
        }
      })
      .catch(function (err) {
        if (status) {
          status.textContent = 'Refresh failed (' + err.message + '); trying again.';
          status.classList.add('stale');
        }
      })
      .finally(function () {
        window.setTimeout(tick, every);
      });
  }
  window.setTimeout(tick, every);
})();
