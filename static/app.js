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
    if (name.startsWith("knob.")) query.append(name, value);
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
    if (name.startsWith("knob.")) query.append(name, value);
  }
  link.href = `${link.pathname}?${query}`;
});
