"""The checkpoint page of a target network says what it averages (the manifest's mixture) and under which
schedule, naming the registered checkpoints."""

from __future__ import annotations

import pytest

from webapp.jobs.models import Checkpoint

pytestmark = pytest.mark.django_db


def test_it_shows_what_a_target_network_averages(client_for):
    base = Checkpoint.objects.create(name="smollm2-base", path="/models/base")
    online = Checkpoint.objects.create(name="iteration-5", path="/models/it5")
    target = Checkpoint.objects.create(name="iteration-5-ema", path="/models/it5-ema", ema_of=online, manifest={
        "kind": "ema-target", "ema_updates": 5, "schedule": {"kind": "polyak", "tau": 0.05, "every": 1},
        "mixture": {"/models/base": 0.773781, "/models/it5": 0.05, "/models/gone": 0.176219}})
    page = client_for("researcher").get(f"/checkpoints/{target.pk}/").content.decode()
    assert "What this target network averages" in page and "Polyak, tau = 0.05; 5 update(s)" in page
    rows = page.split('id="target-mixture"')[1].split("</table>")[0]
    assert rows.index("smollm2-base") < rows.index("/models/gone") < rows.index("iteration-5")  # heaviest first
    assert "0.774" in rows and "0.176" in rows and f'href="/checkpoints/{base.pk}/"' in rows
    assert "What this target" not in client_for("researcher").get(f"/checkpoints/{online.pk}/").content.decode()
