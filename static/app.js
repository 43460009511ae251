// Small progressive enhancements; every page works without this file.

// "Copy as a torchrun script": fetch the wrapped snippet for the knob values chosen in
// the same form and put it on the clipboard. Without JavaScript the download link stays.
document.addEventListener("click", async (event) => {
  const button = event.target.closest(".copy-torchrun");
  if (!button) return;
  const form = button.closest("form");
  const status = form.querySelector(".copy-status");
  const query = new URLSearchParams();
  for (const [name, value] of new FormData(form)) {
    if (name.startsWith("knob.") || name === "variant") query.append(name, value);
  }
  const url = `${button.dataset.script}?${query}`;
  try {
    const response = await fetch(url);
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    await navigator.clipboard.writeText(await response.text());
    status.textContent = "Copied. Run it with: torchrun --nproc_per_node=N <file>.py";
  } catch (err) {
    status.textContent = "Could not copy here; use the download link instead.";
    form.querySelector(".torchrun-download").href = url;
  }
});

// Keep the download link in step with the chosen knob values.
document.addEventListener("change", (event) => {
  const form = event.target.closest(".knobs-form");
  if (!form) return;
  const link = form.querySelector(".torchrun-download");
  const query = new URLSearchParams();
  for (const [name, value] of new FormData(form)) {
    if (name.startsWith("knob.") || name === "variant") query.append(name, value);
  }
  link.href = `${link.pathname}?${query}`;
});

// A mock interview's countdown. The server holds the deadline and refuses late answers; this
// only keeps the shown time true. It counts from the seconds left at page load, so a wrong
// clock on the learner's machine does not matter.
(() => {
  const timer = document.querySelector(".countdown[data-seconds-left]");
  if (!timer) return;
  const value = timer.querySelector(".countdown-value");
  const end = Date.now() + Number(timer.dataset.secondsLeft) * 1000;
  const tick = () => {
    const left = Math.max(0, Math.round((end - Date.now()) / 1000));
    value.textContent = `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
    timer.classList.toggle("low", left <= 60);
    if (left === 0) {
      value.textContent = "0:00 (time is up)";
      return;
    }
    setTimeout(tick, 500);
  };
  tick();
})();
