// memlab runs explorer: the optional reload while a run is in progress (state kept for the tab only).
(function () {
  "use strict";
  var box = document.getElementById("live-reload");
  if (!box) return;
  var KEY = "memlab-ui-live";
  box.checked = sessionStorage.getItem(KEY) === "1";
  var timer = null;
  function arm() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (box.checked) timer = setTimeout(function () { location.reload(); }, 5000);
  }
  box.addEventListener("change", function () {
    sessionStorage.setItem(KEY, box.checked ? "1" : "0");
    arm();
  });
  arm();
})();
