"""The built-in contrast set: sentence pairs with the same words and a swapped relation.

Written once, before any model was run on them, and not changed after seeing results (but for
the erratum below). Three kinds, each with two target words per pair whose label flips between
the two sentences:

* ``role``: who did what to whom (agent / patient); half active, half passive, so the
  agent is not always the first noun;
* ``negation``: which of two words the ``not`` applies to (affirmed / negated);
* ``quantity``: which of two groups is the larger (more / fewer), by numbers, by
  many/few, or by "more X than Y" / "fewer X than Y".

Format (also of a user's file): tab-separated ``category, sentence_a, sentence_b, target,
label_a, label_b``, tokens separated by spaces; ``#`` starts a comment line. The target is
the first occurrence of that token in each sentence; a pair with two targets takes two lines.
The two sentences differ, and the target's label differs between them (else word identity
alone would predict it).

Versions (:data:`VERSION`; an analysis records the version and a digest of the pairs it
measured, and a kept result of other pairs is refused):

* 1: as first written.
* 2 (erratum, 2026-12-08): the role pair "the letter that the editor rejected was written by
  the poet ." / "the letter that the poet rejected was written by the editor ." labelled the
  editor and the poet patient / agent, but both are agents in both sentences (the letter is
  the patient of both verbs), so the pair measured nothing it claimed. It is replaced by the
  passive pair "the editor was criticised by the poet in the letter ." / "the poet was
  criticised by the editor in the letter ." (poet agent / patient, editor patient / agent),
  chosen for what it is, not for any result. Still 50 pairs, 18 of them role pairs (8 of
  them passive, as before).
"""

#: The built-in set's version (see the list above); results record it.
VERSION = 2

BUILTIN = """\
role	the dog chased the cat .	the cat chased the dog .	dog	agent	patient
role	the dog chased the cat .	the cat chased the dog .	cat	patient	agent
role	the teacher praised the student .	the student praised the teacher .	teacher	agent	patient
role	the teacher praised the student .	the student praised the teacher .	student	patient	agent
role	the lawyer called the doctor .	the doctor called the lawyer .	lawyer	agent	patient
role	the lawyer called the doctor .	the doctor called the lawyer .	doctor	patient	agent
role	a bird watched the fox .	a fox watched the bird .	bird	agent	patient
role	a bird watched the fox .	a fox watched the bird .	fox	patient	agent
role	the boy pushed the girl into the pool .	the girl pushed the boy into the pool .	boy	agent	patient
role	the boy pushed the girl into the pool .	the girl pushed the boy into the pool .	girl	patient	agent
role	the police followed the thief through the market .	the thief followed the police through the market .	police	agent	patient
role	the police followed the thief through the market .	the thief followed the police through the market .	thief	patient	agent
role	the senator thanked the mayor after the vote .	the mayor thanked the senator after the vote .	senator	agent	patient
role	the senator thanked the mayor after the vote .	the mayor thanked the senator after the vote .	mayor	patient	agent
role	the team beat the champions in the final .	the champions beat the team in the final .	team	agent	patient
role	the team beat the champions in the final .	the champions beat the team in the final .	champions	patient	agent
role	the wolf that bit the shepherd ran away .	the shepherd that bit the wolf ran away .	wolf	agent	patient
role	the wolf that bit the shepherd ran away .	the shepherd that bit the wolf ran away .	shepherd	patient	agent
role	the company bought the bank last year .	the bank bought the company last year .	company	agent	patient
role	the company bought the bank last year .	the bank bought the company last year .	bank	patient	agent
role	the cat was chased by the dog .	the dog was chased by the cat .	dog	agent	patient
role	the cat was chased by the dog .	the dog was chased by the cat .	cat	patient	agent
role	the manager was interviewed by the reporter .	the reporter was interviewed by the manager .	reporter	agent	patient
role	the manager was interviewed by the reporter .	the reporter was interviewed by the manager .	manager	patient	agent
role	the king was betrayed by the knight .	the knight was betrayed by the king .	knight	agent	patient
role	the king was betrayed by the knight .	the knight was betrayed by the king .	king	patient	agent
role	the nurse was helped by the farmer .	the farmer was helped by the nurse .	farmer	agent	patient
role	the nurse was helped by the farmer .	the farmer was helped by the nurse .	nurse	patient	agent
role	the mouse was caught by the owl .	the owl was caught by the mouse .	owl	agent	patient
role	the mouse was caught by the owl .	the owl was caught by the mouse .	mouse	patient	agent
role	the guard was attacked by the prisoner .	the prisoner was attacked by the guard .	prisoner	agent	patient
role	the guard was attacked by the prisoner .	the prisoner was attacked by the guard .	guard	patient	agent
role	the student was taught by the professor .	the professor was taught by the student .	professor	agent	patient
role	the student was taught by the professor .	the professor was taught by the student .	student	patient	agent
role	the editor was criticised by the poet in the letter .	the poet was criticised by the editor in the letter .	poet	agent	patient
role	the editor was criticised by the poet in the letter .	the poet was criticised by the editor in the letter .	editor	patient	agent
negation	the soup was hot but the tea was not cold .	the soup was cold but the tea was not hot .	hot	affirmed	negated
negation	the soup was hot but the tea was not cold .	the soup was cold but the tea was not hot .	cold	negated	affirmed
negation	the door was open and the window was not locked .	the door was locked and the window was not open .	open	affirmed	negated
negation	the door was open and the window was not locked .	the door was locked and the window was not open .	locked	negated	affirmed
negation	she wanted tea , not coffee .	she wanted coffee , not tea .	tea	affirmed	negated
negation	she wanted tea , not coffee .	she wanted coffee , not tea .	coffee	negated	affirmed
negation	he is tall but not strong .	he is strong but not tall .	tall	affirmed	negated
negation	he is tall but not strong .	he is strong but not tall .	strong	negated	affirmed
negation	the film was long but not boring .	the film was boring but not long .	long	affirmed	negated
negation	the film was long but not boring .	the film was boring but not long .	boring	negated	affirmed
negation	the road was wet but not icy .	the road was icy but not wet .	wet	affirmed	negated
negation	the road was wet but not icy .	the road was icy but not wet .	icy	negated	affirmed
negation	they visited paris , not rome .	they visited rome , not paris .	paris	affirmed	negated
negation	they visited paris , not rome .	they visited rome , not paris .	rome	negated	affirmed
negation	the answer is not yes but no .	the answer is not no but yes .	no	affirmed	negated
negation	the answer is not yes but no .	the answer is not no but yes .	yes	negated	affirmed
negation	the shop sells bread but not milk .	the shop sells milk but not bread .	bread	affirmed	negated
negation	the shop sells bread but not milk .	the shop sells milk but not bread .	milk	negated	affirmed
negation	my brother is not rich but happy .	my brother is not happy but rich .	happy	affirmed	negated
negation	my brother is not rich but happy .	my brother is not happy but rich .	rich	negated	affirmed
negation	the box was heavy and not large .	the box was large and not heavy .	heavy	affirmed	negated
negation	the box was heavy and not large .	the box was large and not heavy .	large	negated	affirmed
negation	the music was not loud , it was fast .	the music was not fast , it was loud .	fast	affirmed	negated
negation	the music was not loud , it was fast .	the music was not fast , it was loud .	loud	negated	affirmed
negation	we chose the red car , not the blue one .	we chose the blue car , not the red one .	red	affirmed	negated
negation	we chose the red car , not the blue one .	we chose the blue car , not the red one .	blue	negated	affirmed
negation	the patient was not awake but calm .	the patient was not calm but awake .	calm	affirmed	negated
negation	the patient was not awake but calm .	the patient was not calm but awake .	awake	negated	affirmed
negation	the room was clean but not quiet .	the room was quiet but not clean .	clean	affirmed	negated
negation	the room was clean but not quiet .	the room was quiet but not clean .	quiet	negated	affirmed
negation	she speaks french but not german .	she speaks german but not french .	french	affirmed	negated
negation	she speaks french but not german .	she speaks german but not french .	german	negated	affirmed
quantity	the three men carried eight boxes .	the eight men carried three boxes .	boxes	more	fewer
quantity	the three men carried eight boxes .	the eight men carried three boxes .	men	fewer	more
quantity	more cats than dogs slept in the barn .	more dogs than cats slept in the barn .	cats	more	fewer
quantity	more cats than dogs slept in the barn .	more dogs than cats slept in the barn .	dogs	fewer	more
quantity	fewer boys than girls joined the club .	fewer girls than boys joined the club .	girls	more	fewer
quantity	fewer boys than girls joined the club .	fewer girls than boys joined the club .	boys	fewer	more
quantity	there were two cups and nine plates on the table .	there were nine cups and two plates on the table .	plates	more	fewer
quantity	there were two cups and nine plates on the table .	there were nine cups and two plates on the table .	cups	fewer	more
quantity	the farm has many cows and few sheep .	the farm has few cows and many sheep .	cows	more	fewer
quantity	the farm has many cows and few sheep .	the farm has few cows and many sheep .	sheep	fewer	more
quantity	more students than teachers came to the meeting .	more teachers than students came to the meeting .	students	more	fewer
quantity	more students than teachers came to the meeting .	more teachers than students came to the meeting .	teachers	fewer	more
quantity	the garden had ten roses and four tulips .	the garden had four roses and ten tulips .	roses	more	fewer
quantity	the garden had ten roses and four tulips .	the garden had four roses and ten tulips .	tulips	fewer	more
quantity	fewer buses than trains left the station .	fewer trains than buses left the station .	trains	more	fewer
quantity	fewer buses than trains left the station .	fewer trains than buses left the station .	buses	fewer	more
quantity	the class had twelve pens and thirty pencils .	the class had thirty pens and twelve pencils .	pencils	more	fewer
quantity	the class had twelve pens and thirty pencils .	the class had thirty pens and twelve pencils .	pens	fewer	more
quantity	more apples than oranges were sold today .	more oranges than apples were sold today .	apples	more	fewer
quantity	more apples than oranges were sold today .	more oranges than apples were sold today .	oranges	fewer	more
quantity	only a few doctors but many nurses worked that night .	only a few nurses but many doctors worked that night .	nurses	more	fewer
quantity	only a few doctors but many nurses worked that night .	only a few nurses but many doctors worked that night .	doctors	fewer	more
quantity	the library lent six novels and forty magazines .	the library lent forty novels and six magazines .	magazines	more	fewer
quantity	the library lent six novels and forty magazines .	the library lent forty novels and six magazines .	novels	fewer	more
quantity	fewer cars than bikes crossed the bridge .	fewer bikes than cars crossed the bridge .	bikes	more	fewer
quantity	fewer cars than bikes crossed the bridge .	fewer bikes than cars crossed the bridge .	cars	fewer	more
quantity	we saw hundreds of birds and a dozen deer .	we saw hundreds of deer and a dozen birds .	birds	more	fewer
quantity	we saw hundreds of birds and a dozen deer .	we saw hundreds of deer and a dozen birds .	deer	fewer	more
quantity	more tourists than locals attended the festival .	more locals than tourists attended the festival .	tourists	more	fewer
quantity	more tourists than locals attended the festival .	more locals than tourists attended the festival .	locals	fewer	more
quantity	the shelf held seven jars and two bottles .	the shelf held two jars and seven bottles .	jars	more	fewer
quantity	the shelf held seven jars and two bottles .	the shelf held two jars and seven bottles .	bottles	fewer	more
"""
